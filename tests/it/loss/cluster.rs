//! A cluster master restarted empty: a Redis loss of the slots it served, which restore
//! covers (the cluster of its own is `support::cluster`).

use agentstate::*;

use crate::live::cluster::{both_copies, slot_of, store_on};
use crate::support::cluster::Cluster;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_restarted_empty_is_a_redis_loss_that_restore_covers() {
    let mut cluster = tokio::task::block_in_place(Cluster::start);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("spill.db");
    let (store, spill) = store_on(&cluster, &db).await;
    let sids: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    for sid in &sids {
        store
            .create_session(&NewSession::new().id(sid))
            .await
            .unwrap();
        for i in 0..3 {
            store
                .append(sid, &NewMessage::new("user").content(format!("{sid}-{i}")))
                .await
                .unwrap();
        }
    }
    daemon_pass(&store, spill.clone()).await;
    let mut before = Vec::new();
    for sid in &sids {
        before.push(both_copies(&store, &db, sid).await);
    }
    // Sessions of node 0 are lost with it; the others stay live.
    let on_node0: Vec<&String> = sids
        .iter()
        .filter(|sid| {
            let slot = slot_of(&cluster, &store, store.keys().partition(sid));
            cluster.owner_of(slot) == 0
        })
        .collect();
    assert!(!on_node0.is_empty() && on_node0.len() < sids.len());
    tokio::task::block_in_place(|| {
        cluster.nodes[0].restart_empty().unwrap();
        cluster.wait_ok();
    });
    let cancel = tokio_util::sync::CancellationToken::new();
    let daemon = tokio::spawn(
        SpillDaemon::open(store.clone(), spill)
            .await
            .unwrap()
            .run(cancel.clone().cancelled_owned()),
    );
    for (sid, (live, rows)) in sids.iter().zip(&before) {
        assert_eq!(
            &both_copies(&store, &db, sid).await,
            &(live.clone(), rows.clone()),
            "{sid}"
        );
    }
    let err = store
        .create_session(&NewSession::new().id(on_node0[0]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists(_)), "{err:?}");
    cancel.cancel();
    daemon.await.unwrap().unwrap();
}
