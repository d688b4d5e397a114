//! The pruner against the real engine: idle containers go, busy ones and other moats' stay.

mod common;

use moat::config::Config;

#[tokio::test]
async fn idle_containers_are_pruned_busy_ones_kept() {
    let Some(m) = common::moat("t-prune", Config::default()).await else {
        return;
    };
    m.exec("idle", "true").await;
    m.background("busy", "sleep 600").await;
    let (idle, busy) = (m.container("idle"), m.container("busy"));
    // Both were last used 25 hours ago.
    let long_ago = moat::store::now_ms() - 25 * 3_600_000;
    m.app
        .store
        .touch_session(&m.key("idle"), &idle, long_ago)
        .unwrap();
    m.app
        .store
        .touch_session(&m.key("busy"), &busy, long_ago)
        .unwrap();
    let removed = moat::session::prune_once(m.app.engine.as_ref(), &m.app.store, 24, 7).await;
    assert_eq!(removed, vec![idle.clone()], "only the idle one goes");
    assert!(m
        .app
        .engine
        .inspect_container(&idle)
        .await
        .unwrap()
        .is_none());
    assert!(m
        .app
        .engine
        .inspect_container(&busy)
        .await
        .unwrap()
        .is_some());
}
