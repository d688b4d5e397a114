//! Closed sets with exactly one text form each: the wire's (docs/http-api.md,
//! docs/approvals.md) and the SQLite table's. The text becomes the enum where a row is read,
//! so a value moat does not know is an error there, never a silent default. Here, below the
//! store, so a wire type (`ApprovalTarget`) and the store's own sets are declared alike.

/// A stored text that names no value of its set (a damaged or newer database).
#[derive(Debug, thiserror::Error)]
#[error("read the approval {what}: `{value}` is not one of {expected}")]
pub struct UnknownValue {
    /// Which set was read (`status`, `target`, `decision`).
    pub what: &'static str,
    /// The text found, escaped for display: it came from a file anyone with the home could edit.
    pub value: String,
    /// The accepted texts, comma-separated, so the message says what would have been read.
    pub expected: String,
}

/// Declares a closed set with one text form per value: `as_str`, `parse`, `Display`, serde
/// (through the same texts) and the SQLite conversions.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal, { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order (tables and tests walk it).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The one text form: on the wire and in the `approvals` table.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value `text` names exactly (case matters, as it does in SQL), if any.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Like [`Self::parse`], with an error that names the set and its values.
            pub fn parse_stored(text: &str) -> Result<Self, $crate::contract::UnknownValue> {
                Self::parse(text).ok_or_else(|| $crate::contract::UnknownValue {
                    what: $what,
                    value: text.escape_debug().to_string(),
                    expected: Self::ALL
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> ::rusqlite::Result<::rusqlite::types::ToSqlOutput<'_>> {
                Ok(::rusqlite::types::ToSqlOutput::Borrowed(::rusqlite::types::ValueRef::Text(self.as_str().as_bytes())))
            }
        }

        impl ::rusqlite::types::FromSql for $name {
            fn column_result(value: ::rusqlite::types::ValueRef<'_>) -> ::rusqlite::types::FromSqlResult<Self> {
                Self::parse_stored(value.as_str()?).map_err(|e| ::rusqlite::types::FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

pub(crate) use text_enum;
