//! `sshare [-a] [-A LIST] [-u LIST] [-U] [-l] [-n] [-p|-P] [-o FIELDS]`: the
//! fair-share tree from the `ShareTree` RPC (the scheduler's own computation),
//! every account and, by default, only this user's rows under them, as sshare
//! shows them.

use std::collections::BTreeSet;
use std::process::ExitCode;

use corral_proto::api::{Empty, ShareRow};

use crate::connection::{Cluster, Retry};
use crate::format::print_fields::{Layout, parsable};
use crate::format::sshare;
use crate::slurm_options::{OptionReader, help_format, list, refuse};

#[derive(Debug, Default)]
struct Options {
    all_users: bool,
    accounts: Vec<String>,
    users: Vec<String>,
    users_only: bool,
    long: bool,
    header: bool,
    layout: Layout,
    fields: Vec<String>,
    help: bool,
    help_format: bool,
}

const HELP: &str = "\
Usage: sshare [OPTIONS]
  -a, --all             every user's rows
  -A, --accounts=LIST   only these accounts
  -e, --helpformat      the fields -o takes
  -l, --long            the long list
  -n, --noheader        no header
  -o, --format=LIST     fields (sshare's names; NAME%WIDTH)
  -p, --parsable        '|' after every field
  -P, --parsable2       '|' between fields
  -u, --users=LIST      these users' rows (-1: all)
  -U, --Users           user rows only
      --help            this text
Fair share is classic (2^(-U/S) on every row); usage is decayed GPU-seconds.
";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        header: true,
        ..Options::default()
    };
    let mut reader = OptionReader::new(args);
    while let Some(name) = reader.next("aehlnpPUmv") {
        match name.as_str() {
            "-a" | "--all" => o.all_users = true,
            "-A" | "--accounts" => o.accounts.extend(list(&reader.value()?)),
            "-e" | "--helpformat" => o.help_format = true,
            "-h" | "-n" | "--noheader" => o.header = false,
            "-l" | "--long" => o.long = true,
            "-o" | "--format" => o.fields.push(reader.value()?),
            "-p" | "--parsable" => o.layout = parsable(true),
            "-P" | "--parsable2" => o.layout = parsable(false),
            "-u" | "--users" => {
                let users = reader.value()?;
                if users == "-1" {
                    o.all_users = true;
                } else {
                    o.users.extend(list(&users));
                }
            }
            "-U" | "--Users" => o.users_only = true,
            "--help" | "--usage" => o.help = true,
            "-M" | "--cluster" | "--clusters" => {
                reader.value()?;
            }
            "-m" | "--partition" | "-v" | "--verbose" => {}
            _ => return Err(format!("unrecognized option '{name}'")),
        }
    }
    Ok(o)
}

/// Runs sshare with its raw arguments.
pub async fn run(
    args: &[String],
    connect: impl FnOnce() -> anyhow::Result<Cluster>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => return Ok(refuse("sshare", &message)),
    };
    if options.help {
        print!("{HELP}");
        return Ok(ExitCode::SUCCESS);
    }
    if options.help_format {
        print!("{}", help_format(sshare::field_names()));
        return Ok(ExitCode::SUCCESS);
    }
    let list = if options.fields.is_empty() {
        sshare::default_fields(options.long).to_string()
    } else {
        options.fields.join(",")
    };
    let columns = match sshare::columns(&list) {
        Ok(columns) => columns,
        Err(message) => {
            eprintln!("sshare: error: {message}");
            return Ok(ExitCode::from(1));
        }
    };
    let cluster = connect()?;
    let reply = cluster
        .call(Retry::Idempotent, |mut c| async move {
            c.share_tree(Empty {}).await
        })
        .await?;
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name);
    let rows = keep(&reply.rows, &options, me.as_deref());
    if json {
        let shown: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "account": r.account, "user": r.user, "depth": r.depth,
                    "raw_shares": r.raw_shares, "norm_shares": r.norm_shares,
                    "raw_usage_gpu_seconds": r.raw_usage, "effective_usage": r.effective_usage,
                    "fairshare": r.fairshare,
                })
            })
            .collect();
        super::print_json(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    print!(
        "{}",
        sshare::table(&rows, &columns, &options.layout, options.header)
    );
    Ok(ExitCode::SUCCESS)
}

/// The rows sshare shows: accounts (those of `-A`, or all), and under them the
/// rows of every user (`-a`), of `-u`'s users, or of this user.
fn keep<'a>(rows: &'a [ShareRow], options: &Options, me: Option<&str>) -> Vec<&'a ShareRow> {
    let accounts: BTreeSet<&str> = options.accounts.iter().map(String::as_str).collect();
    let users: BTreeSet<&str> = if options.users.is_empty() {
        me.into_iter().collect()
    } else {
        options.users.iter().map(String::as_str).collect()
    };
    rows.iter()
        .filter(|r| accounts.is_empty() || accounts.contains(r.account.as_str()))
        .filter(|r| {
            if r.user.is_empty() {
                !options.users_only
            } else {
                options.all_users || users.contains(r.user.as_str())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(account: &str, user: &str) -> ShareRow {
        ShareRow {
            account: account.into(),
            user: user.into(),
            ..ShareRow::default()
        }
    }

    #[test]
    fn by_default_every_account_and_only_my_rows() {
        let rows = [
            row("root", ""),
            row("ml", ""),
            row("ml", "alice"),
            row("ml", "bob"),
        ];
        let shown = |o: &Options| -> Vec<String> {
            keep(&rows, o, Some("alice"))
                .iter()
                .map(|r| format!("{}/{}", r.account, r.user))
                .collect()
        };
        let parsed =
            |line: &[&str]| parse(&line.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        assert_eq!(shown(&parsed(&[])), ["root/", "ml/", "ml/alice"]);
        assert_eq!(shown(&parsed(&["-a"])).len(), 4);
        assert_eq!(shown(&parsed(&["-u", "bob", "-U"])), ["ml/bob"]);
        assert_eq!(
            shown(&parsed(&["-A", "ml", "-a"])),
            ["ml/", "ml/alice", "ml/bob"]
        );
        assert!(parse(&["--bogus".to_string()]).is_err());
    }
}
