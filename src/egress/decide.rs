//! The egress decision: pure, so every rule is table-tested (docs/security.md, "Network
//! egress").
//!
//! Two steps, so that a name is judged before anything looks it up: [`decide_name`] on the
//! name and port alone (a `deny` entry wins; an exact config entry, an operator's grant or a
//! glob allows; an IP literal needs an exact entry; anything else is refused, or asked about
//! with `ask = "on-miss"`), then [`decide`] on what the allowed name resolved to: only an
//! exact config entry reaches any address; for a grant or a glob every non-public answer must
//! be named by an exact entry of its own (no rebinding into the host's network).

use std::net::IpAddr;

use super::addr::is_public;
use super::host::Host;
use super::rules::Rule;
use super::EgressError;
use crate::config::EgressAsk;

/// The parsed policy of one session.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    /// Entries that allow.
    pub allow: Vec<Rule>,
    /// Entries that refuse, whatever else says.
    pub deny: Vec<Rule>,
    /// What a miss does.
    pub ask: EgressAsk,
}

impl EgressPolicy {
    /// Parses the config's entries; an entry that does not parse is an error naming it.
    pub fn parse(allow: &[String], deny: &[String], ask: EgressAsk) -> Result<Self, EgressError> {
        let parse = |v: &[String]| v.iter().map(|e| Rule::parse(e)).collect::<Result<_, _>>();
        Ok(Self {
            allow: parse(allow)?,
            deny: parse(deny)?,
            ask,
        })
    }
}

impl EgressPolicy {
    /// The policy with an operator's per-session override: its allow and deny entries join
    /// the config's (so a deny anywhere still wins), and its ask mode replaces the config's.
    /// Entries that do not parse are left out (they are checked when the operator sets them).
    pub fn with_override(&self, allow: &[String], deny: &[String], ask: Option<&str>) -> Self {
        let mut p = self.clone();
        p.allow
            .extend(allow.iter().filter_map(|e| Rule::parse(e).ok()));
        p.deny
            .extend(deny.iter().filter_map(|e| Rule::parse(e).ok()));
        if let Some(a) = ask.and_then(EgressAsk::parse) {
            p.ask = a;
        }
        p
    }
}

/// The outcome for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Refuse(Refusal),
    /// Refused for now; an operator is asked about the name and port.
    Ask,
    /// Refused for now: the name is allowed, but it resolved to this non-public address, which
    /// no exact entry names; an operator is asked about the address and port.
    AskAddress(IpAddr),
}

/// Why a connection is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A `deny` entry covers it.
    Denied,
    /// No entry covers it.
    NotAllowed,
    /// An IP literal no exact entry names.
    IpLiteral,
    /// The name is allowed, but it resolved to this non-public address.
    Internal(IpAddr),
}

impl Refusal {
    /// Short tag for the audit log.
    pub fn tag(&self) -> &'static str {
        match self {
            Refusal::Denied => "denied",
            Refusal::NotAllowed => "not-allowed",
            Refusal::IpLiteral => "ip-literal",
            Refusal::Internal(_) => "internal-address",
        }
    }
}

/// Which answers of an allowed name the proxy may connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Any: the config names this host exactly, so the operator chose it, wherever it is.
    Any,
    /// Public ones, and a non-public one only when an exact entry (config or grant) names that
    /// address: a glob, or an operator's grant of a name the sandbox may control, must not
    /// lead into the host's network.
    PublicOrNamed,
}

/// What the name alone decides, before anything looks it up: a name that is not allowed is
/// never sent to DNS, so a lookup cannot carry data out (docs/security.md, "Network egress").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameVerdict {
    /// Allowed by name: look it up, then judge the answers with [`decide`].
    Resolve(Answers),
    Refuse(Refusal),
    /// Refused for now; an operator is asked about the name and port.
    Ask,
}

/// Decides `host:port` by its name and port alone, under `policy` plus the exact entries
/// operators granted. In order: a `deny` entry wins; an exact config entry allows any answer;
/// an operator's grant or a glob allows the name; an IP literal needs an exact entry; anything
/// else is a miss.
pub fn decide_name(policy: &EgressPolicy, grants: &[Rule], host: &Host, port: u16) -> NameVerdict {
    if policy.deny.iter().any(|r| r.matches(host, port)) {
        return NameVerdict::Refuse(Refusal::Denied);
    }
    let exact = |rules: &[Rule]| rules.iter().any(|r| r.is_exact() && r.matches(host, port));
    if exact(&policy.allow) {
        return NameVerdict::Resolve(Answers::Any);
    }
    if exact(grants) {
        return NameVerdict::Resolve(Answers::PublicOrNamed);
    }
    if let Host::Ip(_) = host {
        return name_miss(policy, Refusal::IpLiteral);
    }
    if policy.allow.iter().any(|r| r.matches(host, port)) {
        return NameVerdict::Resolve(Answers::PublicOrNamed);
    }
    name_miss(policy, Refusal::NotAllowed)
}

/// Decides a connection to `host:port`, which resolved to `addrs` (the literal itself for an
/// IP literal): the name's verdict, then every answer. A non-public answer of a name that is
/// not an exact config entry needs an exact entry for that address.
///
/// `own` says whether an address is this machine's own (any interface, loopback included):
/// those are never "public", since the proxy reaching one is a connection to the host itself,
/// past the wall, whatever range it is in.
pub fn decide(
    policy: &EgressPolicy,
    grants: &[Rule],
    host: &Host,
    port: u16,
    addrs: &[IpAddr],
    own: impl Fn(IpAddr) -> bool,
) -> Verdict {
    let answers = match decide_name(policy, grants, host, port) {
        NameVerdict::Resolve(a) => a,
        NameVerdict::Refuse(r) => return Verdict::Refuse(r),
        NameVerdict::Ask => return Verdict::Ask,
    };
    if answers == Answers::Any || matches!(host, Host::Ip(_)) {
        return Verdict::Allow;
    }
    let named = |ip: IpAddr| {
        let literal = Host::Ip(ip);
        policy.deny.iter().all(|r| !r.matches(&literal, port))
            && policy
                .allow
                .iter()
                .chain(grants)
                .any(|r| r.is_exact() && r.matches(&literal, port))
    };
    match addrs
        .iter()
        .find(|a| (!is_public(**a) || own(**a)) && !named(**a))
    {
        None => Verdict::Allow,
        Some(ip) => match policy.ask {
            EgressAsk::Off => Verdict::Refuse(Refusal::Internal(*ip)),
            EgressAsk::OnMiss => Verdict::AskAddress(*ip),
        },
    }
}

fn name_miss(policy: &EgressPolicy, refusal: Refusal) -> NameVerdict {
    match policy.ask {
        EgressAsk::Off => NameVerdict::Refuse(refusal),
        EgressAsk::OnMiss => NameVerdict::Ask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str], ask: EgressAsk) -> EgressPolicy {
        let v = |s: &[&str]| s.iter().map(|e| e.to_string()).collect::<Vec<_>>();
        EgressPolicy::parse(&v(allow), &v(deny), ask).unwrap()
    }

    #[test]
    fn table() {
        use EgressAsk::*;
        use Verdict::*;
        let pub_ip = "151.101.0.223";
        let allow = &[
            "pkgs.example.org",
            "*.files.example.net",
            "up-allowed:8080",
            "10.9.9.9",
        ];
        let deny = &["bad.files.example.net", "pkgs.example.org:80"];
        // (ask, grants, host, port, addrs, verdict)
        type Row<'a> = (
            EgressAsk,
            &'a [&'a str],
            &'a str,
            u16,
            &'a [&'a str],
            Verdict,
        );
        let rows: &[Row] = &[
            (Off, &[], "pkgs.example.org", 443, &[pub_ip], Allow),
            // Deny wins over an exact allow.
            (
                Off,
                &[],
                "pkgs.example.org",
                80,
                &[pub_ip],
                Refuse(Refusal::Denied),
            ),
            (Off, &[], "files.files.example.net", 443, &[pub_ip], Allow),
            (
                Off,
                &[],
                "bad.files.example.net",
                443,
                &[pub_ip],
                Refuse(Refusal::Denied),
            ),
            // Deny wins over a grant too.
            (
                Off,
                &["bad.files.example.net:443"],
                "bad.files.example.net",
                443,
                &[pub_ip],
                Refuse(Refusal::Denied),
            ),
            (
                Off,
                &[],
                "example.com",
                443,
                &[pub_ip],
                Refuse(Refusal::NotAllowed),
            ),
            (OnMiss, &[], "example.com", 443, &[pub_ip], Ask),
            (
                OnMiss,
                &[],
                "bad.files.example.net",
                443,
                &[pub_ip],
                Refuse(Refusal::Denied),
            ),
            // A glob never leads to a private, loopback or link-local address.
            (
                Off,
                &[],
                "evil.files.example.net",
                443,
                &["127.0.0.1"],
                Refuse(Refusal::Internal("127.0.0.1".parse().unwrap())),
            ),
            (
                Off,
                &[],
                "evil.files.example.net",
                443,
                &[pub_ip, "169.254.169.254"],
                Refuse(Refusal::Internal("169.254.169.254".parse().unwrap())),
            ),
            (
                Off,
                &[],
                "evil.files.example.net",
                443,
                &["fd00::1"],
                Refuse(Refusal::Internal("fd00::1".parse().unwrap())),
            ),
            // An exact entry may name an internal host on purpose.
            (Off, &[], "up-allowed", 8080, &["172.18.0.2"], Allow),
            (
                Off,
                &[],
                "up-allowed",
                443,
                &["172.18.0.2"],
                Refuse(Refusal::NotAllowed),
            ),
            // IP literals: only by exact entry, never by a glob or `*`.
            (Off, &[], "10.9.9.9", 443, &[], Allow),
            (Off, &[], "10.9.9.8", 443, &[], Refuse(Refusal::IpLiteral)),
            (OnMiss, &[], "10.9.9.8", 443, &[], Ask),
            // An operator's grant allows the name, not where it points: a private answer needs
            // an exact entry for that address.
            (
                Off,
                &["example.com:443"],
                "example.com",
                443,
                &[pub_ip],
                Allow,
            ),
            (
                Off,
                &["example.com:443"],
                "example.com",
                443,
                &["10.0.0.1"],
                Refuse(Refusal::Internal("10.0.0.1".parse().unwrap())),
            ),
            (
                OnMiss,
                &["example.com:443"],
                "example.com",
                443,
                &[pub_ip, "fe80::1"],
                AskAddress("fe80::1".parse().unwrap()),
            ),
            (
                Off,
                &["example.com:443", "10.0.0.1:443"],
                "example.com",
                443,
                &["10.0.0.1"],
                Allow,
            ),
            // The address grant is for its port only.
            (
                Off,
                &["example.com:8443", "10.0.0.1:443"],
                "example.com",
                8443,
                &["10.0.0.1"],
                Refuse(Refusal::Internal("10.0.0.1".parse().unwrap())),
            ),
            // A glob's private answer: asked about as an address with on-miss.
            (
                OnMiss,
                &[],
                "evil.files.example.net",
                443,
                &["127.0.0.1"],
                AskAddress("127.0.0.1".parse().unwrap()),
            ),
            (
                Off,
                &["example.com:443"],
                "example.com",
                8443,
                &[pub_ip],
                Refuse(Refusal::NotAllowed),
            ),
        ];
        let p_off = policy(allow, deny, Off);
        let p_ask = policy(allow, deny, OnMiss);
        for (ask, grants, host, port, addrs, want) in rows {
            let p = if *ask == Off { &p_off } else { &p_ask };
            let grants: Vec<Rule> = grants.iter().map(|g| Rule::parse(g).unwrap()).collect();
            let addrs: Vec<IpAddr> = addrs.iter().map(|a| a.parse().unwrap()).collect();
            let host = Host::parse(host).unwrap();
            assert_eq!(
                &decide(p, &grants, &host, *port, &addrs, |_| false),
                want,
                "{ask:?} {grants:?} {host:?}:{port} {addrs:?}"
            );
        }
        // The name alone: what is refused or asked about needs no lookup, so none happens.
        let n =
            |p: &EgressPolicy, h: &str, port| decide_name(p, &[], &Host::parse(h).unwrap(), port);
        assert_eq!(
            n(&p_off, "example.com", 443),
            NameVerdict::Refuse(Refusal::NotAllowed)
        );
        assert_eq!(n(&p_ask, "example.com", 443), NameVerdict::Ask);
        assert_eq!(
            n(&p_ask, "bad.files.example.net", 443),
            NameVerdict::Refuse(Refusal::Denied)
        );
        assert_eq!(
            n(&p_off, "pkgs.example.org", 443),
            NameVerdict::Resolve(Answers::Any)
        );
        assert_eq!(
            n(&p_off, "x.files.example.net", 443),
            NameVerdict::Resolve(Answers::PublicOrNamed)
        );
        assert_eq!(n(&p_ask, "10.9.9.8", 443), NameVerdict::Ask);
        // A denied address is not named by a grant of it.
        let deny_addr = policy(&["*"], &["10.0.0.1:*"], Off);
        let grants = [Rule::parse("10.0.0.1:443").unwrap()];
        assert_eq!(
            decide(
                &deny_addr,
                &grants,
                &Host::parse("x.example").unwrap(),
                443,
                &["10.0.0.1".parse().unwrap()],
                |_| false
            ),
            Refuse(Refusal::Internal("10.0.0.1".parse().unwrap()))
        );
        // The host's own address is not public, whatever its range: a glob or a grant does not
        // reach it, an exact entry for it (or for the name in the config) does.
        let host_pub: IpAddr = "100.128.77.1".parse().unwrap();
        let own = |ip: IpAddr| ip == "100.128.77.1".parse::<IpAddr>().unwrap();
        let glob = Host::parse("x.files.example.net").unwrap();
        assert_eq!(
            decide(&p_off, &[], &glob, 443, &[host_pub], own),
            Refuse(Refusal::Internal(host_pub))
        );
        assert_eq!(
            decide(&p_ask, &[], &glob, 443, &[host_pub], own),
            AskAddress(host_pub)
        );
        let named = [Rule::parse("100.128.77.1:443").unwrap()];
        assert_eq!(decide(&p_off, &named, &glob, 443, &[host_pub], own), Allow);
        assert_eq!(
            decide(
                &p_off,
                &[],
                &Host::parse("pkgs.example.org").unwrap(),
                443,
                &[host_pub],
                own
            ),
            Allow
        );
        // An operator's override adds entries and sets ask; a config deny still wins.
        let host = |h: &str| Host::parse(h).unwrap();
        let public: Vec<IpAddr> = vec![pub_ip.parse().unwrap()];
        let o = p_off.with_override(
            &[
                "example.com".into(),
                "bad.files.example.net".into(),
                "py*".into(),
            ],
            &["files.files.example.net".into()],
            Some("on-miss"),
        );
        assert_eq!(
            decide(&o, &[], &host("example.com"), 443, &public, |_| false),
            Allow
        );
        assert_eq!(
            decide(
                &o,
                &[],
                &host("bad.files.example.net"),
                443,
                &public,
                |_| false
            ),
            Refuse(Refusal::Denied)
        );
        assert_eq!(
            decide(
                &o,
                &[],
                &host("files.files.example.net"),
                443,
                &public,
                |_| false
            ),
            Refuse(Refusal::Denied)
        );
        assert_eq!(
            decide(&o, &[], &host("other.test"), 443, &public, |_| false),
            Ask
        );
        let same = p_ask.with_override(&[], &[], Some("nonsense"));
        assert_eq!(same.ask, OnMiss);
        assert_eq!(p_ask.with_override(&[], &[], Some("off")).ask, Off);
        // `*` allows public names, never literals or internal answers.
        let all = policy(&["*"], &[], Off);
        let name = Host::parse("x.example").unwrap();
        let public = [pub_ip.parse().unwrap()];
        assert_eq!(decide(&all, &[], &name, 443, &public, |_| false), Allow);
        let lit = Host::parse("1.1.1.1").unwrap();
        assert_eq!(
            decide(&all, &[], &lit, 443, &[], |_| false),
            Refuse(Refusal::IpLiteral)
        );
    }
}
