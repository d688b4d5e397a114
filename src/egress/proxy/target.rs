//! Where a proxy request wants to go, read from the request line alone (pure).
//!
//! `CONNECT host:port` opens a tunnel; anything else must carry an absolute `http://` URI
//! (the proxy form). The decision is on this host; the request's own `Host` header is replaced
//! with it before forwarding, so a request cannot name one host to the policy and another to
//! the upstream.

use http::{Method, Uri};

use crate::egress::host::{split_authority, Host};
use crate::egress::EgressError;

/// A parsed proxy request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host the decision is about, and the one the request is sent to.
    pub host: Host,
    /// 80 when a plain request's URI names none.
    pub port: u16,
    /// `None` for a tunnel; the origin-form path and query for a plain request.
    pub path: Option<String>,
}

pub fn parse(method: &Method, uri: &Uri) -> Result<Target, EgressError> {
    let bad = || EgressError::BadHost(uri.to_string().chars().take(80).collect());
    if method == Method::CONNECT {
        let authority = uri.authority().ok_or_else(bad)?;
        let (host, port) = split_authority(authority.as_str())?;
        return Ok(Target {
            host,
            port,
            path: None,
        });
    }
    if uri.scheme_str() != Some("http") {
        return Err(bad());
    }
    let authority = uri.authority().ok_or_else(bad)?;
    // Userinfo (`user@host`) is not the host: refuse it rather than guess.
    if authority.as_str().contains('@') {
        return Err(bad());
    }
    let host = Host::parse(authority.host())?;
    let port = authority.port_u16().unwrap_or(80);
    if port == 0 {
        return Err(bad());
    }
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    Ok(Target {
        host,
        port,
        path: Some(path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let get = Method::GET;
        let connect = Method::CONNECT;
        // (method, uri, Some((host, port, path)) or None)
        type Row<'a> = (&'a Method, &'a str, Option<(&'a str, u16, Option<&'a str>)>);
        let rows: &[Row] = &[
            (
                &connect,
                "pkgs.example.org:443",
                Some(("pkgs.example.org", 443, None)),
            ),
            (&connect, "[::1]:443", Some(("::1", 443, None))),
            (&connect, "pkgs.example.org", None),
            (
                &get,
                "http://up-allowed/x?y=1",
                Some(("up-allowed", 80, Some("/x?y=1"))),
            ),
            (&get, "http://UP:8080", Some(("up", 8080, Some("/")))),
            (&get, "https://pkgs.example.org/", None),
            (&get, "/relative", None),
            (&get, "http://user@evil/", None),
            (&get, "http://2130706433/", None),
        ];
        for (method, uri, want) in rows {
            let got = uri
                .parse::<Uri>()
                .ok()
                .and_then(|u| parse(method, &u).ok())
                .map(|t| (t.host.text(), t.port, t.path));
            let want = want.map(|(h, p, path)| (h.to_string(), p, path.map(str::to_string)));
            assert_eq!(got, want, "{method} {uri}");
        }
    }
}
