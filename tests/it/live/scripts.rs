//! Script errors: what a Lua script's runtime error tells whoever reads it.

use agentstate::NewMessage;

use crate::support::*;

/// A script's runtime error names the line of `lua/` that failed, not the line of the built
/// script Redis ran (`user_script:NN`, counted over the prepended prelude helpers): here the
/// prelude's `refresh_ttl`, on a session whose meta `ttl` is not a number and whose refresh
/// is due (an append then runs its own script, `append_message.lua`).
#[tokio::test]
async fn a_script_error_names_its_lua_file_and_line() {
    let t = env().await;
    create(&t, "s", None, None).await;
    let meta = t.store.keys().session("s").meta;
    t.cmd::<()>(&["HSET", &meta, "ttl", "soon"]);
    t.cmd::<()>(&["HDEL", &meta, "ttl_at"]);
    let err = t
        .store
        .append("s", &NewMessage::new("user").content("m"))
        .await
        .unwrap_err()
        .to_string();
    let prelude = include_str!("../../../lua/_prelude.lua");
    let line = 1 + prelude
        .lines()
        .position(|l| l.contains("local slack = math.floor(ttl * 100)"))
        .unwrap();
    assert!(
        err.contains(&format!(
            "lua/_prelude.lua:{line}: attempt to perform arithmetic"
        )),
        "{err}"
    );
    assert!(!err.contains("user_script"), "{err}");
}
