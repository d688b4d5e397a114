echo $(cat <<E
$(id)
E
)