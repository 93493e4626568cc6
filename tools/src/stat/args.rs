//! Command line of kae-stat.

pub const USAGE: &str = "\
usage: kae-stat [--json] [-i SECONDS [-n COUNT]]
       kae-stat --check [--conf FILE]

Shows kae's counters for every process that has kae loaded: one row per process, then
the total. Pages are read from $KAE_STATS_DIR (default /dev/shm/kae), one directory per
user; run as root to see every user's processes.

  --json                one JSON line per snapshot
  -i, --interval SECS   a snapshot every SECS seconds (Ctrl-C to stop); each table is
                        headed by the time in UTC, e.g. `--- 2026-12-01 07:40:12Z`
  -n, --count COUNT     with -i: stop after COUNT snapshots
  --check               load the OpenSSL configuration as OpenSSL does (--conf FILE, else
                        $OPENSSL_CONF, else OpenSSL's default file) and say whether kae is
                        active in it, with its backend: exit 0 if it is, 1 (saying why) if
                        not. Run it before a server (re)start, e.g. as a systemd
                        ExecStartPre=, with the environment the server gets
  --conf FILE           with --check: the configuration file to check
  -V, --version         print the version and exit
  -h, --help            this text

Exit status: 0; 1 when --check finds kae inactive; 2 for a usage error.
";

/// What the command line asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Opts {
    pub json: bool,
    pub interval: Option<f64>,
    pub count: Option<u64>,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Opts),
    /// `--check`, with `--conf FILE` if given.
    Check(Option<String>),
    Help,
    Version,
}

fn value<'a>(opt: &str, v: Option<&'a String>) -> Result<&'a str, String> {
    v.map(String::as_str)
        .ok_or_else(|| format!("option '{opt}' needs a value"))
}

/// Parses the arguments after the program name; Err is the message for a usage error.
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut o = Opts::default();
    let (mut check, mut conf) = (false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        // --interval=1 as well as --interval 1.
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = |opt: &str| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => value(opt, it.next()).map(str::to_string),
            }
        };
        match name {
            "--json" if inline.is_none() => o.json = true,
            "-i" | "--interval" => {
                let v = val(name)?;
                let secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86400.0 * 365.0)
                    .ok_or_else(|| format!("{name}: '{v}' is not a number of seconds above 0"))?;
                o.interval = Some(secs);
            }
            "-n" | "--count" => {
                let v = val(name)?;
                let n = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name}: '{v}' is not a count above 0"))?;
                o.count = Some(n);
            }
            "--check" if inline.is_none() => check = true,
            "--conf" => {
                let v = val(name)?;
                if v.is_empty() {
                    return Err("--conf: an empty file name".into());
                }
                conf = Some(v);
            }
            "-h" | "--help" if inline.is_none() => return Ok(Parsed::Help),
            "-V" | "--version" if inline.is_none() => return Ok(Parsed::Version),
            _ if a.starts_with('-') && a.len() > 1 => return Err(format!("unknown option '{a}'")),
            _ => {
                return Err(format!(
                    "unexpected argument '{a}' (kae-stat takes options only)"
                ))
            }
        }
    }
    if check {
        if o != Opts::default() {
            return Err("--check takes no other option than --conf".into());
        }
        return Ok(Parsed::Check(conf));
    }
    if conf.is_some() {
        return Err("--conf needs --check".into());
    }
    if o.count.is_some() && o.interval.is_none() {
        return Err("-n/--count needs -i/--interval".into());
    }
    Ok(Parsed::Run(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Parsed, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options() {
        assert_eq!(p(&[]), Ok(Parsed::Run(Opts::default())));
        assert_eq!(
            p(&["--json", "-i", "0.5", "-n", "3"]),
            Ok(Parsed::Run(Opts {
                json: true,
                interval: Some(0.5),
                count: Some(3)
            }))
        );
        assert_eq!(
            p(&["--interval=2", "--count=1"]),
            Ok(Parsed::Run(Opts {
                json: false,
                interval: Some(2.0),
                count: Some(1)
            }))
        );
        assert_eq!(p(&["--version"]), Ok(Parsed::Version));
        assert_eq!(p(&["-V"]), Ok(Parsed::Version));
        assert_eq!(p(&["--json", "-h"]), Ok(Parsed::Help));
        assert_eq!(p(&["--check"]), Ok(Parsed::Check(None)));
        assert_eq!(
            p(&["--conf=/etc/ssl/x.cnf", "--check"]),
            Ok(Parsed::Check(Some("/etc/ssl/x.cnf".into())))
        );
    }

    #[test]
    fn usage_errors_name_the_culprit() {
        let err = |a: &[&str]| p(a).unwrap_err();
        assert_eq!(err(&["--jsno"]), "unknown option '--jsno'");
        assert_eq!(err(&["-x"]), "unknown option '-x'");
        assert_eq!(err(&["--json=yes"]), "unknown option '--json=yes'");
        assert!(err(&["extra"]).contains("'extra'"));
        assert_eq!(err(&["-i"]), "option '-i' needs a value");
        for bad in ["0", "-1", "abc", "NaN", "inf"] {
            assert!(err(&["-i", bad]).contains(&format!("'{bad}'")), "{bad}");
        }
        assert!(err(&["-i", "1", "-n", "0"]).contains("'0'"));
        assert!(err(&["-n", "2"]).contains("needs -i"));
        assert!(err(&["--conf", "x.cnf"]).contains("needs --check"));
        assert!(err(&["--check", "--json"]).contains("--check takes no other"));
        assert_eq!(err(&["--check", "--conf"]), "option '--conf' needs a value");
    }
}
