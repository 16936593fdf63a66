//! End to end: the `corral` binary invoked through a link named `sinfo`, as
//! users copy sinfo commands from guides, against a local cluster of one
//! controller and two agents (partitions `gpu`, the default, and `urgent`,
//! both on gpu[01-02]) with gpu02 drained: `-o`, `-N -l`, `-R` and `-s` print
//! Slurm 22.05's headers, widths and rows; `corral nodes` adds its GPU column.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use support::{LocalCluster, slurm_link};

/// Runs `sinfo ARGS` as the admin through the cluster's `bin/sinfo`.
fn sinfo(cluster: &LocalCluster, args: &[&str]) -> Output {
    slurm_link(cluster, "sinfo", "user-corral-admin", args)
}

/// `sinfo ARGS`, which must succeed and print nothing on stderr; its stdout.
fn ok(cluster: &LocalCluster, args: &[&str]) -> String {
    let out = sinfo(cluster, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "sinfo {args:?} failed ({}): {stderr}",
        out.status
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Polls `sinfo ARGS` until its output is `want`, for up to 60 seconds.
fn wait_for(cluster: &LocalCluster, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = ok(cluster, args);
        if out == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sinfo {args:?} never printed\n{want}\nlast:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sinfo_prints_slurms_formats_through_its_link() {
    let cluster = LocalCluster::start_with_agents(1, 2);
    wait_for(
        &cluster,
        &["-N", "-h", "-t", "idle", "-p", "gpu", "-o", "%N"],
        "gpu01\ngpu02\n",
    );
    cluster.ok(
        "user-corral-admin",
        &["node", "drain", "gpu02", "--reason", "disk failing"],
    );
    wait_for(
        &cluster,
        &["-h", "-R", "-o", "%N %E"],
        "gpu02 disk failing\n",
    );

    assert_eq!(
        ok(&cluster, &["-o", "%P %a %l %D %t %N"]),
        "\
PARTITION AVAIL TIMELIMIT NODES STATE NODELIST
gpu* up 7-00:00:00 1 drain gpu02
gpu* up 7-00:00:00 1 idle gpu01
urgent up 1-00:00:00 1 drain gpu02
urgent up 1-00:00:00 1 idle gpu01
"
    );

    let long = ok(&cluster, &["-N", "-l"]);
    let (date, table) = long.split_once('\n').unwrap();
    assert_eq!(date.len(), 24, "not a ctime date: {date:?}");
    assert!(
        date[20..].parse::<u32>().is_ok() && &date[3..4] == " " && &date[10..11] == " ",
        "not a ctime date: {date:?}"
    );
    assert_eq!(
        table,
        "\
NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              
gpu01          1      gpu*        idle 64     1:64:1 524288        0      1   (null) none                
gpu01          1    urgent        idle 64     1:64:1 524288        0      1   (null) none                
gpu02          1      gpu*     drained 64     1:64:1 524288        0      1   (null) disk failing        
gpu02          1    urgent     drained 64     1:64:1 524288        0      1   (null) disk failing        
"
    );

    let reasons = ok(&cluster, &["-R"]);
    let lines: Vec<&str> = reasons.lines().collect();
    assert_eq!(
        lines[0],
        "REASON               USER      TIMESTAMP           NODELIST"
    );
    assert_eq!(lines.len(), 2, "{reasons}");
    assert!(
        lines[1].starts_with("disk failing         corral-ad 20") && lines[1].ends_with(" gpu02"),
        "{reasons}"
    );
    let stamp = &lines[1][31..50];
    assert_eq!(
        (&stamp[4..5], &stamp[10..11], &stamp[13..14]),
        ("-", "T", ":"),
        "{reasons}"
    );

    assert_eq!(
        ok(&cluster, &["-s"]),
        "\
PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST
gpu*         up 7-00:00:00          0/1/1/2 gpu[01-02]
urgent       up 1-00:00:00          0/1/1/2 gpu[01-02]
"
    );

    // Errors as sinfo words them; `-h` is --noheader.
    let bad = sinfo(&cluster, &["-t", "bogus"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .starts_with("sinfo: error: Bad state string: \"bogus\"\n"),
        "{bad:?}"
    );
    // `-t idle` takes drained idle nodes too, as in Slurm.
    let unknown = sinfo(
        &cluster,
        &["-h", "-p", "urgent", "-t", "idle", "-o", "%D %t %Q"],
    );
    assert_eq!(
        String::from_utf8_lossy(&unknown.stdout),
        "1 drain %Q\n1 idle %Q\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&unknown.stderr),
        "Invalid node format specification: Q\n"
    );

    // Invoked as corral, the default view adds the GPU column.
    assert_eq!(
        cluster.ok("user-corral-admin", &["nodes", "-p", "gpu"]),
        "\
PARTITION AVAIL  TIMELIMIT  NODES  STATE GPUS(total/free) NODELIST
gpu*         up 7-00:00:00      1  drain              8/0 gpu02
gpu*         up 7-00:00:00      1   idle              8/8 gpu01
"
    );
}
