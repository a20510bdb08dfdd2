//! Rounds: the StateService contract (append max+1, explicit overwrite, sparse ids, export
//! latest / specific / absent).

use serde_json::json;

use crate::support::env;

#[tokio::test]
async fn rounds_follow_the_state_service_contract() {
    let t = env().await;
    let s = &t.store;
    assert_eq!(s.export_state("ann", None, None).await.unwrap(), None);
    assert_eq!(
        s.save_state("ann", &json!({"r": 1}), None, None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": 2}), None, None)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": 5}), None, Some(5))
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": 6}), None, None)
            .await
            .unwrap(),
        6
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": "2b"}), None, Some(2))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": 3}), None, Some(3))
            .await
            .unwrap(),
        3
    );

    assert_eq!(
        s.export_state("ann", None, None).await.unwrap(),
        Some(json!({"r": 6}))
    );
    assert_eq!(
        s.export_state("ann", None, Some(2)).await.unwrap(),
        Some(json!({"r": "2b"}))
    );
    assert_eq!(
        s.export_state("ann", None, Some(3)).await.unwrap(),
        Some(json!({"r": 3}))
    );
    assert_eq!(s.export_state("ann", None, Some(4)).await.unwrap(), None);
    assert_eq!(
        s.export_state("ann", Some("default"), Some(1))
            .await
            .unwrap(),
        Some(json!({"r": 1}))
    );
    assert_eq!(
        s.save_state("ann", &json!({"r": 7}), None, None)
            .await
            .unwrap(),
        7
    );

    // Sessions and users are separate sequences.
    assert_eq!(
        s.export_state("ann", Some("other"), None).await.unwrap(),
        None
    );
    assert_eq!(
        s.save_state("ann", &json!("o"), Some("other"), None)
            .await
            .unwrap(),
        1
    );
    assert_eq!(s.export_state("bob", None, None).await.unwrap(), None);
    assert_eq!(
        s.export_state("ann", None, None).await.unwrap(),
        Some(json!({"r": 7}))
    );

    // The stored value is a copy of what the caller passed.
    let mut state = json!({"list": [1]});
    assert_eq!(s.save_state("cy", &state, None, None).await.unwrap(), 1);
    state["list"] = json!([1, 2]);
    assert_eq!(
        s.export_state("cy", None, None).await.unwrap(),
        Some(json!({"list": [1]}))
    );

    let rounds: Vec<String> = t
        .wal_ops("round")
        .into_iter()
        .map(|(id, d)| {
            let d: serde_json::Value = serde_json::from_str(&d).unwrap();
            format!(
                "{id}/{}/{}",
                d["session_id"].as_str().unwrap(),
                d["round_id"]
            )
        })
        .collect();
    let mut sorted = rounds.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "ann/default/1",
            "ann/default/2",
            "ann/default/2",
            "ann/default/3",
            "ann/default/5",
            "ann/default/6",
            "ann/default/7",
            "ann/other/1",
            "cy/default/1"
        ]
    );
}

#[tokio::test]
async fn round_ids_are_exact_up_to_the_maximum_and_rejected_above_it() {
    let t = env().await;
    let s = &t.store;
    let max = agentstate::MAX_ROUND_ID;
    for round in [99_999_999_999_999, 100_000_000_000_000, max] {
        assert_eq!(
            s.save_state("big", &json!(round), None, Some(round))
                .await
                .unwrap(),
            round
        );
        assert_eq!(
            s.export_state("big", None, Some(round)).await.unwrap(),
            Some(json!(round))
        );
    }
    let logged: Vec<u64> = t
        .wal_ops("round")
        .iter()
        .map(|(_, d)| {
            serde_json::from_str::<serde_json::Value>(d).unwrap()["round_id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(logged, [99_999_999_999_999, 100_000_000_000_000, max]);

    let err = t
        .rejected(s.save_state("big", &json!(1), None, Some(max + 1)))
        .await;
    assert!(matches!(err, agentstate::Error::InvalidInput(_)), "{err:?}");
    let err = t.rejected(s.export_state("big", None, Some(max + 1))).await;
    assert!(matches!(err, agentstate::Error::InvalidInput(_)), "{err:?}");
}
