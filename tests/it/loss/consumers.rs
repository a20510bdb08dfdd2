//! Consumer groups when Redis lost its streams: a consumer rejoins, and decisions recorded
//! between the loss and the rejoin are delivered.

use agentstate::*;

use crate::live::consumer::{decision_ids, fast};
use crate::support::*;

#[tokio::test]
async fn a_consumer_rejoins_when_redis_lost_its_streams() {
    let t = env().await;
    let s = &t.store;
    let mut c = s.consumer("svc", "c1", fast()).await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut t.redis()).unwrap();
    assert!(c.read().await.unwrap().is_empty());
    t.flush().await; // a daemon checks the emptied Redis before sessions are created again
    let sids = sessions(s, 1).await;
    let ids = record_decisions(s, &sids, 2).await;
    assert_eq!(decision_ids(&c.read().await.unwrap()), ids);
}

#[tokio::test]
async fn decisions_recorded_after_redis_loss_but_before_the_rejoin_are_not_missed() {
    let t = env().await;
    let s = &t.store;
    let mut c = s
        .consumer("svc", "c1", fast().start(StartFrom::Now))
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut t.redis()).unwrap();
    t.flush().await; // a daemon checks the emptied Redis before sessions are created again
    let sids = sessions(s, 1).await;
    let ids = record_decisions(s, &sids, 3).await;
    assert_eq!(decision_ids(&c.read().await.unwrap()), ids);
}
