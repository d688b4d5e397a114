//! Safe bins: stdin-only filters that pass without an allowlist entry.
//!
//! Each binary has a profile listing every option the GNU tool knows (so abbreviations
//! resolve as the tool would resolve them) with a verdict, plus a rule for operands. A safe-bin
//! use may read only stdin and write only stdout: options that name files, recurse, spawn
//! programs or follow files are denied, and operands that would be files are refused.

use super::options::{deny, flag, optional, scan, value, Arg, Opt, OptionSpec};

/// What the operands of a safe bin may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// None at all: every operand would be a file (`-` meaning stdin is tolerated).
    None,
    /// One pattern unless `-e`/`--regexp` supplied it; anything more is a file.
    GrepPattern,
    /// One or two character sets.
    TrSets,
}

/// The argv profile of one safe bin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Profile {
    /// The binary's name.
    pub name: &'static str,
    /// Its options.
    pub spec: OptionSpec,
    /// Its operand rule.
    pub operands: Operands,
}

const HELP: Opt = flag(None, Some("help"));
const VERSION: Opt = flag(None, Some("version"));

const SORT: &[Opt] = &[
    flag(Some('b'), Some("ignore-leading-blanks")),
    flag(None, Some("debug")),
    flag(Some('d'), Some("dictionary-order")),
    flag(Some('f'), Some("ignore-case")),
    deny(None, Some("files0-from"), Arg::Required),
    flag(Some('g'), Some("general-numeric-sort")),
    flag(Some('i'), Some("ignore-nonprinting")),
    value(Some('k'), Some("key")),
    flag(Some('m'), Some("merge")),
    flag(Some('M'), Some("month-sort")),
    flag(Some('h'), Some("human-numeric-sort")),
    flag(Some('n'), Some("numeric-sort")),
    deny(Some('o'), Some("output"), Arg::Required),
    flag(Some('R'), Some("random-sort")),
    deny(None, Some("random-source"), Arg::Required),
    flag(Some('r'), Some("reverse")),
    value(None, Some("sort")),
    flag(Some('V'), Some("version-sort")),
    flag(Some('s'), Some("stable")),
    deny(Some('T'), Some("temporary-directory"), Arg::Required),
    flag(Some('u'), Some("unique")),
    flag(Some('z'), Some("zero-terminated")),
    optional("check"),
    flag(Some('c'), None),
    flag(Some('C'), None),
    deny(None, Some("compress-program"), Arg::Required),
    value(Some('t'), Some("field-separator")),
    value(Some('S'), Some("buffer-size")),
    value(None, Some("batch-size")),
    value(None, Some("parallel")),
    HELP,
    VERSION,
];

const GREP: &[Opt] = &[
    value(Some('A'), Some("after-context")),
    flag(Some('G'), Some("basic-regexp")),
    value(Some('B'), Some("before-context")),
    value(None, Some("binary-files")),
    flag(Some('b'), Some("byte-offset")),
    value(Some('C'), Some("context")),
    optional("color"),
    optional("colour"),
    flag(Some('c'), Some("count")),
    deny(Some('D'), Some("devices"), Arg::Required),
    deny(Some('d'), Some("directories"), Arg::Required),
    deny(Some('R'), Some("dereference-recursive"), Arg::None),
    deny(None, Some("exclude"), Arg::Required),
    deny(None, Some("exclude-from"), Arg::Required),
    deny(None, Some("exclude-dir"), Arg::Required),
    flag(Some('E'), Some("extended-regexp")),
    deny(Some('f'), Some("file"), Arg::Required),
    flag(Some('l'), Some("files-with-matches")),
    flag(Some('L'), Some("files-without-match")),
    flag(Some('F'), Some("fixed-strings")),
    HELP,
    deny(None, Some("include"), Arg::Required),
    flag(Some('i'), Some("ignore-case")),
    flag(Some('y'), None),
    flag(None, Some("no-ignore-case")),
    flag(Some('T'), Some("initial-tab")),
    value(None, Some("label")),
    flag(None, Some("line-buffered")),
    flag(Some('n'), Some("line-number")),
    flag(Some('x'), Some("line-regexp")),
    value(Some('m'), Some("max-count")),
    flag(Some('h'), Some("no-filename")),
    flag(None, Some("no-group-separator")),
    value(None, Some("group-separator")),
    flag(Some('s'), Some("no-messages")),
    flag(Some('Z'), Some("null")),
    flag(Some('z'), Some("null-data")),
    flag(Some('o'), Some("only-matching")),
    flag(Some('P'), Some("perl-regexp")),
    flag(Some('q'), Some("quiet")),
    deny(Some('r'), Some("recursive"), Arg::None),
    value(Some('e'), Some("regexp")),
    flag(Some('v'), Some("invert-match")),
    flag(None, Some("silent")),
    flag(Some('a'), Some("text")),
    flag(Some('U'), Some("binary")),
    flag(Some('V'), Some("version")),
    flag(Some('H'), Some("with-filename")),
    flag(Some('w'), Some("word-regexp")),
];

const HEAD: &[Opt] = &[
    value(Some('c'), Some("bytes")),
    value(Some('n'), Some("lines")),
    flag(Some('q'), Some("quiet")),
    flag(None, Some("silent")),
    flag(Some('v'), Some("verbose")),
    flag(Some('z'), Some("zero-terminated")),
    HELP,
    VERSION,
];

const TAIL: &[Opt] = &[
    value(Some('c'), Some("bytes")),
    deny(Some('f'), Some("follow"), Arg::Optional),
    deny(Some('F'), None, Arg::None),
    value(Some('n'), Some("lines")),
    deny(None, Some("max-unchanged-stats"), Arg::Required),
    deny(None, Some("pid"), Arg::Required),
    flag(Some('q'), Some("quiet")),
    deny(None, Some("retry"), Arg::None),
    flag(None, Some("silent")),
    deny(Some('s'), Some("sleep-interval"), Arg::Required),
    flag(Some('v'), Some("verbose")),
    flag(Some('z'), Some("zero-terminated")),
    HELP,
    VERSION,
];

const WC: &[Opt] = &[
    flag(Some('c'), Some("bytes")),
    flag(Some('m'), Some("chars")),
    flag(Some('l'), Some("lines")),
    deny(None, Some("files0-from"), Arg::Required),
    flag(Some('L'), Some("max-line-length")),
    flag(Some('w'), Some("words")),
    value(None, Some("total")),
    HELP,
    VERSION,
];

const CUT: &[Opt] = &[
    value(Some('b'), Some("bytes")),
    value(Some('c'), Some("characters")),
    value(Some('d'), Some("delimiter")),
    value(Some('f'), Some("fields")),
    flag(Some('n'), None),
    flag(None, Some("complement")),
    flag(Some('s'), Some("only-delimited")),
    value(None, Some("output-delimiter")),
    flag(Some('z'), Some("zero-terminated")),
    HELP,
    VERSION,
];

const UNIQ: &[Opt] = &[
    flag(Some('c'), Some("count")),
    flag(Some('d'), Some("repeated")),
    flag(Some('D'), None),
    optional("all-repeated"),
    value(Some('f'), Some("skip-fields")),
    value(Some('s'), Some("skip-chars")),
    flag(Some('u'), Some("unique")),
    flag(Some('z'), Some("zero-terminated")),
    value(Some('w'), Some("check-chars")),
    flag(Some('i'), Some("ignore-case")),
    optional("group"),
    HELP,
    VERSION,
];

const TR: &[Opt] = &[
    flag(Some('c'), Some("complement")),
    flag(Some('C'), None),
    flag(Some('d'), Some("delete")),
    flag(Some('s'), Some("squeeze-repeats")),
    flag(Some('t'), Some("truncate-set1")),
    HELP,
    VERSION,
];

const fn spec(opts: &'static [Opt], numeric: bool) -> OptionSpec {
    OptionSpec {
        opts,
        numeric,
        permute: true,
    }
}

const PROFILES: &[Profile] = &[
    Profile {
        name: "sort",
        spec: spec(SORT, false),
        operands: Operands::None,
    },
    Profile {
        name: "grep",
        spec: spec(GREP, true),
        operands: Operands::GrepPattern,
    },
    Profile {
        name: "head",
        spec: spec(HEAD, true),
        operands: Operands::None,
    },
    Profile {
        name: "tail",
        spec: spec(TAIL, true),
        operands: Operands::None,
    },
    Profile {
        name: "wc",
        spec: spec(WC, false),
        operands: Operands::None,
    },
    Profile {
        name: "cut",
        spec: spec(CUT, false),
        operands: Operands::None,
    },
    Profile {
        name: "uniq",
        spec: spec(UNIQ, false),
        operands: Operands::None,
    },
    Profile {
        name: "tr",
        spec: spec(TR, false),
        operands: Operands::TrSets,
    },
];

/// The profile of a safe bin, if one exists.
pub(crate) fn profile(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Checks the arguments (without `argv[0]`) of a safe-bin use against its profile.
pub(crate) fn check(profile: &Profile, args: &[String]) -> Result<(), String> {
    let scanned = scan(&profile.spec, args)?;
    let files: Vec<&String> = match profile.operands {
        Operands::None => scanned.operands.iter().collect(),
        Operands::GrepPattern => {
            let pattern_given = scanned.seen.iter().any(|s| s == "--regexp");
            if !pattern_given && scanned.operands.is_empty() {
                return Err("missing pattern".to_owned());
            }
            scanned
                .operands
                .iter()
                .skip(usize::from(!pattern_given))
                .collect()
        }
        Operands::TrSets => {
            return match scanned.operands.len() {
                1 | 2 => Ok(()),
                0 => Err("missing character set".to_owned()),
                _ => Err("more than two character sets".to_owned()),
            };
        }
    };
    match files.iter().find(|operand| operand.as_str() != "-") {
        Some(operand) => Err(format!("file operand {operand:?}")),
        None => Ok(()),
    }
}

/// Checks a use that reads files: the same options as [`check`], and up to `max_files` file
/// operands besides grep's pattern and tr's sets. uniq's second operand is its output file, so
/// it takes one at most. Used by the host's built-in argv profiles (known_safe.rs), where an
/// allowlisted filter may read the files it names.
pub(crate) fn check_reading(
    profile: &Profile,
    args: &[String],
    max_files: usize,
) -> Result<(), String> {
    let scanned = scan(&profile.spec, args)?;
    let files = match profile.operands {
        Operands::TrSets => return check(profile, args),
        Operands::None => scanned.operands.len(),
        Operands::GrepPattern => {
            let pattern_given = scanned.seen.iter().any(|s| s == "--regexp");
            if !pattern_given && scanned.operands.is_empty() {
                return Err("missing pattern".to_owned());
            }
            scanned.operands.len() - usize::from(!pattern_given)
        }
    };
    let max = if profile.name == "uniq" { 1 } else { max_files };
    if files > max {
        return Err(format!(
            "{files} file operands, the profile takes at most {max}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &str) -> Result<(), String> {
        let words: Vec<String> = argv.split(' ').map(str::to_owned).collect();
        let profile = profile(&words[0]).expect("profile");
        check(profile, &words[1..])
    }

    #[test]
    fn allowed_uses() {
        let rows = [
            "wc -l",
            "wc -lw",
            "wc --lines",
            "wc --li",
            "wc -c -m -w -L",
            "wc -",
            "sort -r",
            "sort -rn",
            "sort -u -k2,2 -t,",
            "sort -k 2 -t :",
            "sort --key=2 --field-separator=,",
            "sort --rev",
            "sort -S 10M",
            "sort --parallel=2",
            "sort --check",
            "sort -c",
            "sort -h",
            "sort -V",
            "sort --debug",
            "uniq -c",
            "uniq -cd",
            "uniq -u",
            "uniq -f 1 -s 2 -w 3",
            "uniq --all-repeated=separate",
            "uniq --group",
            "head -5",
            "head -n 5",
            "head -n5",
            "head -n -5",
            "head --lines=5",
            "head -c 100",
            "head --byt=10",
            "tail -5",
            "tail -n 5",
            "tail -n +5",
            "tail -c 10",
            "tail -q",
            "cut -d, -f1",
            "cut -d : -f 1,3",
            "cut -c1-10",
            "cut --fields=1 --delimiter=,",
            "cut -f1 --complement",
            "cut -f1 --output-delimiter=;",
            "cut -f1 --output=;",
            "cut -b 1-3",
            "tr a-z A-Z",
            "tr -d x",
            "tr -s a b",
            "tr -cd a-z",
            "tr -- -a b",
            "grep foo",
            "grep -i foo",
            "grep -v -e foo -e bar",
            "grep -e foo",
            "grep --regexp=foo",
            "grep -E a|b",
            "grep -c foo",
            "grep -n -o foo",
            "grep -A 2 -B1 -C3 foo",
            "grep -3 foo",
            "grep -m1 foo",
            "grep -w -x foo",
            "grep -F a.b",
            "grep -P \\d",
            "grep --color=auto foo",
            "grep --colour foo",
            "grep -q foo",
            "grep -- -foo",
            "grep foo -",
            "grep -z foo",
            "grep --ignore-case foo",
            "grep --ignore foo",
        ];
        for argv in rows {
            assert_eq!(run(argv), Ok(()), "argv {argv:?}");
        }
    }

    #[test]
    fn refused_uses() {
        let rows: &[(&str, &str)] = &[
            ("sort -o out", "denied option -o (--output)"),
            ("sort -ro out", "denied option -o (--output)"),
            ("sort -rout", "denied option -o (--output)"),
            ("sort --output=out", "denied option --output"),
            ("sort --output out", "denied option --output"),
            ("sort --out=x", "denied option --out (--output)"),
            ("sort --outp=x", "denied option --outp (--output)"),
            ("sort --o x", "denied option --o (--output)"),
            (
                "sort --compress-program=sh",
                "denied option --compress-program",
            ),
            (
                "sort --compress-program sh",
                "denied option --compress-program",
            ),
            (
                "sort --compress-prog=sh",
                "denied option --compress-prog (--compress-program)",
            ),
            (
                "sort --compress=sh",
                "denied option --compress (--compress-program)",
            ),
            (
                "sort --comp=sh",
                "denied option --comp (--compress-program)",
            ),
            ("sort --com=sh", "denied option --com (--compress-program)"),
            ("sort --c", "ambiguous option --c"),
            ("sort --ra", "ambiguous option --ra"),
            ("sort -T /tmp", "denied option -T (--temporary-directory)"),
            (
                "sort --temporary-directory=/tmp",
                "denied option --temporary-directory",
            ),
            (
                "sort --temp=/tmp",
                "denied option --temp (--temporary-directory)",
            ),
            ("sort --files0-from=list", "denied option --files0-from"),
            (
                "sort --files0=list",
                "denied option --files0 (--files0-from)",
            ),
            ("sort --f=list", "ambiguous option --f"),
            (
                "sort --random-source=/dev/urandom",
                "denied option --random-source",
            ),
            (
                "sort --random-sou=x",
                "denied option --random-sou (--random-source)",
            ),
            ("sort --random-so=x", "ambiguous option --random-so"),
            ("sort file.txt", "file operand \"file.txt\""),
            ("sort -r /etc/passwd", "file operand \"/etc/passwd\""),
            ("sort -x", "unknown option -x"),
            ("sort --bogus", "unknown option --bogus"),
            ("grep -f patterns", "denied option -f (--file)"),
            ("grep -if patterns", "denied option -f (--file)"),
            ("grep --file=patterns", "denied option --file"),
            ("grep --fil=patterns", "ambiguous option --fil"),
            ("grep -r foo", "denied option -r (--recursive)"),
            ("grep -R foo", "denied option -R (--dereference-recursive)"),
            ("grep -ri foo", "denied option -r (--recursive)"),
            ("grep --recursive foo", "denied option --recursive"),
            ("grep --rec foo", "denied option --rec (--recursive)"),
            (
                "grep --deref foo",
                "denied option --deref (--dereference-recursive)",
            ),
            ("grep -d recurse foo", "denied option -d (--directories)"),
            (
                "grep --directories=recurse foo",
                "denied option --directories",
            ),
            (
                "grep --dir=recurse foo",
                "denied option --dir (--directories)",
            ),
            ("grep --include=*.rs foo", "denied option --include"),
            ("grep --exclude-from=x foo", "denied option --exclude-from"),
            (
                "grep --exclude-d=x foo",
                "denied option --exclude-d (--exclude-dir)",
            ),
            ("grep --exclude=x foo", "denied option --exclude"),
            ("grep -D skip foo", "denied option -D (--devices)"),
            ("grep foo file.txt", "file operand \"file.txt\""),
            ("grep foo /etc/shadow", "file operand \"/etc/shadow\""),
            ("grep -e foo file.txt", "file operand \"file.txt\""),
            ("grep", "missing pattern"),
            ("grep -i", "missing pattern"),
            ("grep --e foo", "ambiguous option --e"),
            ("grep --col foo", "ambiguous option --col"),
            ("tail -f", "denied option -f (--follow)"),
            ("tail -F", "denied option -F"),
            ("tail --follow", "denied option --follow"),
            ("tail --follow=name", "denied option --follow"),
            ("tail --fo", "denied option --fo (--follow)"),
            ("tail --pid=1", "denied option --pid"),
            ("tail --retry", "denied option --retry"),
            ("tail -s 1", "denied option -s (--sleep-interval)"),
            ("tail -5f", "unknown option -5f"),
            (
                "tail ---presume-input-pipe",
                "unknown option ---presume-input-pipe",
            ),
            ("tail +5", "file operand \"+5\""),
            ("tail log.txt", "file operand \"log.txt\""),
            ("head /etc/passwd", "file operand \"/etc/passwd\""),
            ("head -n", "option -n needs a value"),
            ("wc --files0-from=list", "denied option --files0-from"),
            ("wc --files=list", "denied option --files (--files0-from)"),
            ("wc --f=list", "denied option --f (--files0-from)"),
            ("wc file.txt", "file operand \"file.txt\""),
            ("wc -l *.rs", "file operand \"*.rs\""),
            ("cut -f1 data.csv", "file operand \"data.csv\""),
            ("uniq in out", "file operand \"in\""),
            ("uniq - out", "file operand \"out\""),
            ("uniq -3", "unknown option -3"),
            ("tr", "missing character set"),
            ("tr a b c", "more than two character sets"),
            ("tr -x a", "unknown option -x"),
        ];
        for (argv, want) in rows {
            assert_eq!(run(argv), Err((*want).to_owned()), "argv {argv:?}");
        }
    }

    #[test]
    fn every_profile_has_unique_options() {
        for profile in PROFILES {
            let opts = profile.spec.opts;
            for (i, a) in opts.iter().enumerate() {
                for b in &opts[i + 1..] {
                    assert!(
                        a.short.is_none() || a.short != b.short,
                        "{}: duplicate short {:?}",
                        profile.name,
                        a.short
                    );
                    assert!(
                        a.long.is_none() || a.long != b.long,
                        "{}: duplicate long {:?}",
                        profile.name,
                        a.long
                    );
                }
            }
        }
    }
}
