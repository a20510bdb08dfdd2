//! The client side of `scripts/append-callgrind.sh`: 8 tasks append 1,000 messages each to
//! their own session through one `Store` (W1's shape, with one fixed 256-character content),
//! so callgrind can count this process' instructions per append.
//!
//! Usage: `append_callgrind REDIS_URL PREFIX` (a namespace a spill daemon has checked:
//! `agentstate --prefix PREFIX spill --once` first).

use agentstate::{Config, NewMessage, NewSession, Store};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> agentstate::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(prefix)) = (args.next(), args.next()) else {
        eprintln!("usage: append_callgrind REDIS_URL PREFIX");
        std::process::exit(2);
    };
    let store = Store::connect(Config::new(url).prefix(prefix)).await?;
    let content = "x".repeat(256);
    let tasks: Vec<tokio::task::JoinHandle<agentstate::Result<()>>> = (0..8)
        .map(|task| {
            let (store, content) = (store.clone(), content.clone());
            tokio::spawn(async move {
                let sid = format!("callgrind_{task}");
                store
                    .create_session(&NewSession::new().id(&sid).user("bench"))
                    .await?;
                for m in 0..1000 {
                    let role = if m % 2 == 0 { "user" } else { "assistant" };
                    store
                        .append(&sid, &NewMessage::new(role).content(content.clone()))
                        .await?;
                }
                Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("an append task panicked")?;
    }
    Ok(())
}
