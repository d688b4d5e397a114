echo $(
( j?;9 x0$-<[''<< && git)