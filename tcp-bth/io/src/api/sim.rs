//! The async API over the simulated link: two endpoints on one virtual clock, served by a
//! tokio task that runs [`Net`] (the same driver turn as the TUN path, [`crate::turn::turn`])
//! as fast as the CPU allows, and rests when nothing is in flight and no timer is set.

use super::serve::{ApiApp, Wake};
use super::{ApiError, AsyncEndpoint, AsyncQp};
use crate::sim::link::LinkConfig;
use crate::sim::pair_configs;
use crate::sim::Net;
use std::sync::Arc;
use std::time::Duration;
use tcp_bth::EndpointConfig;
use tokio::sync::Notify;

/// Longest real pause before a timer fires when nothing else is pending (see `drive`).
const TIMER_PACE: Duration = Duration::from_millis(10);

struct NotifyWake(Notify);

impl Wake for NotifyWake {
    fn wake(&self) {
        // Stores a permit if the task is not waiting yet, so no command is missed.
        self.0.notify_one();
    }
}

/// Two endpoints joined by a simulated link with `link`; A's stack has address
/// [`crate::sim::pair::A_IP`], B's [`crate::sim::pair::B_IP`], and B listens on
/// [`crate::sim::pair::B_PORT`] with the configuration of [`pair_configs`]`(seed)`. Must be
/// called inside a tokio runtime. The returned configuration is what A connects with.
pub fn sim_endpoints(
    link: LinkConfig,
    seed: u64,
) -> (AsyncEndpoint, AsyncEndpoint, tcp_bth::Config) {
    let (a_cfg, b_cfg) = pair_configs(seed);
    let key = |n: u8| {
        let mut k = [n; 16];
        k[..8].copy_from_slice(&seed.to_le_bytes());
        tcp_bth::isn::IsnKey(k)
    };
    let ea = EndpointConfig {
        key: key(0xA),
        ..EndpointConfig::default()
    };
    let eb = EndpointConfig {
        key: key(0xB),
        ..EndpointConfig::default()
    };
    let mut net = Net::new(ea, eb, link);
    net.b
        .listen(b_cfg.local_port, b_cfg)
        .expect("the simulated link sets no packet limit");
    let wake = Arc::new(NotifyWake(Notify::new()));
    let (app_a, ha) = ApiApp::new(wake.clone());
    let (app_b, hb) = ApiApp::new(wake.clone());
    tokio::spawn(drive(net, [app_a, app_b], wake));
    let mut connect = a_cfg;
    connect.local_port = 0;
    (ha, hb, connect)
}

/// Two connected QPs over the simulated link (A connected to B).
pub async fn sim_pair(link: LinkConfig, seed: u64) -> Result<(AsyncQp, AsyncQp), ApiError> {
    let (a, b, cfg) = sim_endpoints(link, seed);
    let accept = tokio::spawn(async move { b.accept().await });
    let qa = a.connect(cfg).await?;
    let qb = accept.await.map_err(|_| ApiError::DriverGone)??;
    Ok((qa, qb))
}

async fn drive(mut net: Net, mut apps: [ApiApp; 2], wake: Arc<NotifyWake>) {
    loop {
        let [app_a, app_b] = &mut apps;
        net.turns_now(app_a, app_b);
        let now = net.now;
        if apps.iter().all(ApiApp::finished) && net.link.next_arrival().is_none() {
            // Every handle is gone and nothing is in flight: nobody can ask for more.
            return;
        }
        let arrival = net.link.next_arrival();
        let timer = [net.a.poll_timeout(), net.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match (arrival, timer) {
            (Some(a), None) => {
                net.now = now.max(a);
                tokio::task::yield_now().await;
            }
            (Some(a), Some(t)) if a <= t => {
                net.now = now.max(a);
                // Let the application tasks run between steps.
                tokio::task::yield_now().await;
            }
            (_, Some(t)) => {
                // Only a timer is next. Virtual time must not run past the applications: a
                // receive about to be posted would otherwise lose to a persist probe or the
                // RNR timeout, which real time would never let fire first. So the gap passes
                // in real time too (at most TIMER_PACE), unless a command comes first.
                let gap = t.saturating_sub(now).min(TIMER_PACE);
                tokio::select! {
                    _ = wake.0.notified() => {}
                    _ = tokio::time::sleep(gap) => net.now = now.max(t),
                }
            }
            // Nothing will happen until an application asks for something.
            (None, None) => wake.0.notified().await,
        }
    }
}
