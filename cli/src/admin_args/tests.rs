//! Tests of `corral admin ...`: every subcommand parses and builds the expected
//! change, bad values give errors that say what to do, and the built changes
//! are accepted by the state machine on the testkit cluster.

use std::collections::BTreeSet;

use clap::Parser;
use corral_proto::admin::AdminChange;
use corral_state::account::{Account, User};
use corral_state::node::{GpuDefinition, NodeDefinition};
use corral_state::partition::{Partition, PreemptMode};
use corral_state::qos::Qos;
use corral_state::reservation::Reservation;
use corral_state::slurm::duration::TimeLimit;
use corral_state::testkit::{admin, at, check_invariants, cluster};
use corral_state::{Role, Timestamp};

use super::{AdminArgs, AdminArgsError, parse_when};

/// `corral admin` as the lead's parser will nest it.
#[derive(Debug, Parser)]
struct TestCli {
    #[command(subcommand)]
    admin: AdminArgs,
}

/// 2026-11-21T08:00:00 UTC.
const NOW: Timestamp = Timestamp::from_secs(1_795_248_000);

fn argv(args: &str) -> impl Iterator<Item = &str> {
    std::iter::once("admin").chain(args.split_whitespace())
}

/// The change `corral admin ARGS` asks for (words split on whitespace).
fn change(args: &str) -> Result<AdminChange, AdminArgsError> {
    TestCli::try_parse_from(argv(args))
        .unwrap()
        .admin
        .into_change(NOW)
}

/// clap's complaint about `corral admin ARGS`.
fn parse_error(args: &str) -> String {
    TestCli::try_parse_from(argv(args)).unwrap_err().to_string()
}

/// Our complaint about `corral admin ARGS`.
fn invalid(args: &str) -> String {
    change(args).unwrap_err().to_string()
}

fn names(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn account_set_defaults_to_root_parent() {
    assert_eq!(
        change("account set nlp").unwrap(),
        AdminChange::SetAccount(Account {
            name: "nlp".into(),
            parent: Some("root".into()),
            shares: 1,
            default_qos: None,
            description: String::new(),
            limits: Default::default(),
        })
    );
    let args = [
        "admin",
        "account",
        "set",
        "vision",
        "--parent",
        "ml",
        "--shares",
        "20",
        "--default-qos",
        "high",
        "--description",
        "CV group",
    ];
    let parsed = TestCli::try_parse_from(args).unwrap();
    assert_eq!(
        parsed.admin.into_change(NOW).unwrap(),
        AdminChange::SetAccount(Account {
            name: "vision".into(),
            parent: Some("ml".into()),
            shares: 20,
            default_qos: Some("high".into()),
            description: "CV group".into(),
            limits: Default::default(),
        })
    );
    let AdminChange::SetAccount(root) = change("account set root").unwrap() else {
        panic!("not an account");
    };
    assert_eq!(root.parent, None);
    assert_eq!(
        change("account remove nlp").unwrap(),
        AdminChange::RemoveAccount("nlp".into())
    );
    assert!(parse_error("account set nlp --shares many").contains("--shares"));
}

#[test]
fn user_set_includes_the_default_account() {
    assert_eq!(
        change("user set carol --account ml --accounts nlp,vision --admin-level operator").unwrap(),
        AdminChange::SetUser(User {
            name: "carol".into(),
            default_account: "ml".into(),
            accounts: names(&["ml", "nlp", "vision"]),
            role: Role::Operator,
            limits: Default::default(),
        })
    );
    let AdminChange::SetUser(plain) = change("user set dave --account ml").unwrap() else {
        panic!("not a user");
    };
    assert_eq!(plain.role, Role::User);
    assert_eq!(plain.accounts, names(&["ml"]));
    assert_eq!(
        change("user remove dave").unwrap(),
        AdminChange::RemoveUser("dave".into())
    );
    assert!(parse_error("user set dave").contains("--account"));
    assert!(
        parse_error("user set dave --account ml --admin-level root")
            .contains("possible values: none, operator, admin")
    );
}

#[test]
fn qos_set_with_limits() {
    assert_eq!(
        change(
            "qos set high --priority 100 --preempts low,scavenger --preempt-mode requeue \
             --grp-gpus 64 --grp-gpu-minutes 90000 --max-wall 2-00:00:00 \
             --max-gpus-per-user 16 --max-jobs-per-user 10"
        )
        .unwrap(),
        AdminChange::SetQos(Qos {
            name: "high".into(),
            priority: 100,
            preempts: names(&["low", "scavenger"]),
            preempt_mode: Some(PreemptMode::Requeue),
            grp_gpus_per_account: Some(64),
            grp_gpu_minutes_per_account: Some(90_000),
            max_wall_seconds: Some(2 * 86_400),
            max_gpus_per_user: Some(16),
            max_jobs_per_user: Some(10),
        })
    );
    let AdminChange::SetQos(open) = change("qos set open --max-wall UNLIMITED").unwrap() else {
        panic!("not a QOS");
    };
    assert_eq!(open.max_wall_seconds, None);
    assert_eq!(open.priority, 0);
    assert!(open.preempts.is_empty() && open.preempt_mode.is_none());
    assert!(
        invalid("qos set x --max-wall 1-25").starts_with("--max-wall: invalid time limit "),
        "{}",
        invalid("qos set x --max-wall 1-25")
    );
    assert_eq!(
        change("qos remove high").unwrap(),
        AdminChange::RemoveQos("high".into())
    );
}

#[test]
fn partition_set_with_every_option() {
    assert_eq!(
        change(
            "partition set debug --nodes n[1-2] --max-time 4:00:00 --default-time 30 \
             --priority-tier 5 --default --down --allow-accounts ml,nlp --preempt-mode cancel"
        )
        .unwrap(),
        AdminChange::SetPartition(Partition {
            name: "debug".into(),
            hostlist: "n[1-2]".into(),
            nodes: names(&["n1", "n2"]),
            max_time: TimeLimit::Seconds(4 * 3600),
            default_time: Some(TimeLimit::Seconds(1800)),
            priority_tier: 5,
            allowed_accounts: Some(names(&["ml", "nlp"])),
            preempt_mode: PreemptMode::Cancel,
            is_default: true,
            up: false,
        })
    );
    let AdminChange::SetPartition(plain) = change("partition set all --nodes n[1-4]").unwrap()
    else {
        panic!("not a partition");
    };
    assert_eq!(plain.max_time, TimeLimit::Unlimited);
    assert_eq!(plain.default_time, None);
    assert_eq!(plain.allowed_accounts, None);
    assert_eq!(plain.preempt_mode, PreemptMode::Off);
    assert!(plain.up && !plain.is_default);
    assert_eq!(plain.priority_tier, 1);
    assert_eq!(
        change("partition remove debug").unwrap(),
        AdminChange::RemovePartition("debug".into())
    );
}

#[test]
fn partition_errors_say_what_to_do() {
    assert!(invalid("partition set p --nodes n[1-").starts_with("--nodes: invalid hostlist"));
    let empty = TestCli::try_parse_from(["admin", "partition", "set", "p", "--nodes", ""])
        .unwrap()
        .admin
        .into_change(NOW)
        .unwrap_err();
    assert_eq!(
        empty.to_string(),
        "partition 'p' needs nodes: give --nodes, e.g. --nodes gpu-node[001-016]"
    );
    assert_eq!(
        invalid("partition set p --nodes n1 --max-time 1:00:00 --default-time 2:00:00"),
        "partition 'p': --default-time is longer than --max-time; shorten it or raise --max-time"
    );
    assert!(parse_error("partition set p").contains("--nodes"));
    assert!(parse_error("partition set p --nodes n1 --preempt-mode suspend").contains("suspend"));
}

#[test]
fn reservation_create_with_duration_or_end() {
    let expected = Reservation {
        name: "train-run".into(),
        nodes: names(&["n3", "n4"]),
        start: NOW.plus_secs(3600),
        end: NOW.plus_secs(3600 + 86_400),
        users: names(&["alice"]),
        accounts: names(&["ml"]),
        maintenance: false,
    };
    assert_eq!(
        change(
            "reservation create train-run --start now+1hour --duration 1-00:00:00 \
             --nodes n[3-4] --users alice --accounts ml"
        )
        .unwrap(),
        AdminChange::SetReservation(expected.clone())
    );
    assert_eq!(
        change(
            "reservation create train-run --start 2026-11-21T09:00 --end 2026-11-22T09:00:00Z \
             --nodes n3,n4 --users alice --accounts ml"
        )
        .unwrap(),
        AdminChange::SetReservation(expected)
    );
    let AdminChange::SetReservation(maint) =
        change("reservation create maint --duration 4:00:00 --nodes n1 --maintenance").unwrap()
    else {
        panic!("not a reservation");
    };
    assert_eq!((maint.start, maint.end), (NOW, NOW.plus_secs(4 * 3600)));
    assert!(maint.maintenance);
    assert_eq!(
        change("reservation delete maint").unwrap(),
        AdminChange::DeleteReservation("maint".into())
    );
}

#[test]
fn reservation_errors_say_what_to_do() {
    let base = "reservation create r --nodes n1 --users alice";
    assert!(parse_error(base).contains("--duration"));
    assert!(
        parse_error(&format!("{base} --duration 1:00:00 --end now+2h"))
            .contains("cannot be used with")
    );
    assert_eq!(
        invalid(&format!("{base} --duration UNLIMITED")),
        "--duration must be finite (e.g. 4:00:00 or 7-00:00:00); a reservation has an end"
    );
    assert_eq!(
        invalid(&format!("{base} --end now")),
        "reservation 'r' must end after it starts; check --start and --end"
    );
    assert_eq!(
        invalid(&format!("{base} --end tomorrow")),
        "--end: invalid time 'tomorrow': not a valid date and time; expected now, \
         now+COUNT[UNIT] (e.g. now+2hours) or a UTC date and time such as 2026-11-21T08:00:00"
    );
    assert!(invalid(&format!("{base} --end now+3fortnights")).contains("unknown unit"));
    assert!(invalid(&format!("{base} --end now-1h")).contains("only now+"));
    assert!(invalid(&format!("{base} --end 2026-02-30T00:00")).contains("not a valid date"));
    assert!(invalid(&format!("{base} --end 2600-01-01")).contains("later than 2500-01-01"));
    assert_eq!(
        invalid("reservation create r --nodes n1 --duration 60"),
        "reservation 'r' admits nobody: give --users or --accounts, or --maintenance for a \
         maintenance window"
    );
}

#[test]
fn when_forms() {
    let when = |text: &str| parse_when("--start", text, NOW).unwrap();
    assert_eq!(when("now"), NOW);
    assert_eq!(when("NOW"), NOW);
    assert_eq!(when("now+30"), NOW.plus_secs(30));
    assert_eq!(when("now+90min"), NOW.plus_secs(5400));
    assert_eq!(when("now+2days"), NOW.plus_secs(2 * 86_400));
    assert_eq!(when("now+1w"), NOW.plus_secs(7 * 86_400));
    assert_eq!(
        when("2026-11-21"),
        Timestamp::from_secs(1_795_248_000 - 8 * 3600)
    );
    assert_eq!(when("2026-11-21T08:00"), NOW);
    assert_eq!(when(" 2026-11-21T08:00:00Z "), NOW);
    assert_eq!(
        when("2028-02-29T23:59:59"),
        Timestamp::from_secs(1_835_481_599)
    );
    for bad in [
        "2026-11-21T08",
        "26-11-21",
        "2026-1-21",
        "2026-11-21T08:00:00+02:00",
        "now+",
        "",
    ] {
        assert!(
            parse_when("--start", bad, NOW).is_err(),
            "{bad} was accepted"
        );
    }
}

#[test]
fn node_define_and_remove() {
    let gpu_node = |name: &str| NodeDefinition {
        name: name.to_string(),
        cpus: 96,
        memory_mb: 1024 * 1024,
        gpus: (0..2)
            .map(|index| GpuDefinition {
                index,
                gpu_type: "h100".into(),
            })
            .collect(),
        features: names(&["ib", "nvlink"]),
    };
    assert_eq!(
        change(
            "node define g[1-2] --cpus 96 --memory 1T --gpus 2 --gpu-type h100 --features ib,nvlink"
        )
        .unwrap(),
        AdminChange::DefineNodes(vec![gpu_node("g1"), gpu_node("g2")])
    );
    let AdminChange::DefineNodes(cpu_only) =
        change("node define c1 --cpus 8 --memory 16384").unwrap()
    else {
        panic!("not nodes");
    };
    assert!(cpu_only[0].gpus.is_empty());
    assert_eq!(cpu_only[0].memory_mb, 16_384);
    assert_eq!(
        change("node remove g1").unwrap(),
        AdminChange::RemoveNode("g1".into())
    );
}

#[test]
fn node_errors_say_what_to_do() {
    let define = "node define g1 --cpus 8 --memory 64G";
    assert_eq!(
        invalid(&format!("{define} --gpus 8")),
        "--gpus needs --gpu-type, the type jobs ask for (e.g. --gpu-type h100)"
    );
    assert_eq!(
        invalid(&format!("{define} --gpus 65 --gpu-type h100")),
        "--gpus 65 is more than corral supports on one node (64)"
    );
    assert!(
        invalid("node define g1 --cpus 8 --memory 1.5G")
            .starts_with("--memory: invalid memory size"),
        "{}",
        invalid("node define g1 --cpus 8 --memory 1.5G")
    );
    assert_eq!(
        invalid("node define g1 --cpus 0 --memory 1G"),
        "--cpus must be at least 1"
    );
    assert!(
        invalid("node define g[1- --cpus 1 --memory 1G").starts_with("NODES: invalid hostlist")
    );
    assert_eq!(
        invalid("node remove g[1-2]"),
        "'g[1-2]' is not one node name; remove nodes one at a time"
    );
    assert!(parse_error("node define g1 --memory 1G").contains("--cpus"));
}

#[test]
fn built_changes_are_accepted_by_the_state_machine() {
    let mut state = cluster(4, 8);
    let steps = [
        "qos set low",
        "qos set high --priority 10 --preempts low --max-wall 2-00:00:00",
        "account set nlp --parent ml --shares 5 --default-qos high",
        "user set carol --account nlp --accounts ml --admin-level admin",
        "node define g[1-2] --cpus 96 --memory 1T --gpus 4 --gpu-type a100",
        "partition set a100 --nodes g[1-2] --max-time 1-00:00:00 --default-time 1:00:00 \
         --allow-accounts nlp --preempt-mode requeue",
        "reservation create demo --start now+1h --duration 2:00:00 --nodes n[3-4] --users alice",
        "reservation delete demo",
        "partition remove a100",
        "node remove g2",
        "user remove carol",
        "account remove nlp",
        "qos remove high",
    ];
    for args in steps {
        let command = change(args).unwrap().into_command(admin(), at(1));
        if let Err(e) = state.apply(command) {
            panic!("`{args}` was refused: {e}");
        }
        check_invariants(&state);
    }
    assert!(state.nodes().contains_key("g1") && !state.nodes().contains_key("g2"));
    assert_eq!(state.qos().keys().collect::<Vec<_>>(), ["low"]);
    assert!(state.reservations().is_empty());
    assert!(!state.accounts().contains_key("nlp"));
}

#[test]
fn liveness_set_builds_the_change_the_cluster_accepts_and_refuses_by_flag() {
    let set =
        change("liveness set --heartbeat-ms 250 --lease-ms 4000 --down-margin-ms 3000").unwrap();
    let liveness = corral_state::node_liveness::NodeLiveness {
        heartbeat_ms: 250,
        lease_ms: 4_000,
        down_margin_ms: 3_000,
    };
    assert_eq!(set, AdminChange::SetLiveness(liveness));
    let mut state = cluster(2, 8);
    state
        .apply(set.into_command(admin(), at(10)))
        .expect("the cluster accepts it");
    assert_eq!(state.liveness().map(|l| l.current), Some(liveness));
    check_invariants(&state);

    let short = change("liveness set --heartbeat-ms 500 --lease-ms 10000 --down-margin-ms 500")
        .unwrap_err()
        .to_string();
    assert!(
        short.starts_with("--down-margin-ms: 500 ms is too short"),
        "{short}"
    );
    let lease = change("liveness set --heartbeat-ms 500 --lease-ms 1000 --down-margin-ms 5000")
        .unwrap_err()
        .to_string();
    assert!(
        lease.contains("--lease-ms") && lease.contains("four heartbeats"),
        "{lease}"
    );
}
