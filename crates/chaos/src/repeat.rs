//! The command that repeats a run: its seed and every flag that shapes it.

use crate::args::{ChaosArgs, Sabotage, StoreKind};

/// `chargeonce chaos ...` with the seed and flags of this run.
pub(crate) fn command(seed: u64, a: &ChaosArgs) -> String {
    let mut command = format!(
        "chargeonce chaos --seed {seed} --intents {} --clients {} --instances {} --shops {} \
         --kills {} --freezes {} --commit-window-kills {} --pg-restarts {} \
         --delay-rate {} --reset-rate {} --drop-rate {} --acquirer-lost-rate {} --acquirer-error-rate {} \
         --double-click-rate {} --late-retry-rate {} --changed-body-rate {} --refund-rate {} --decline-rate {} \
         --lease {} --attempt-timeout {} --call-budget {}",
        a.intents,
        a.clients,
        a.instances,
        a.shops,
        a.kills,
        a.freezes,
        a.commit_window_kills,
        if a.pg_ha || a.store == StoreKind::Sqlite {
            0
        } else {
            a.pg_restarts
        },
        a.delay_rate,
        a.reset_rate,
        a.drop_rate,
        a.acquirer_lost_rate,
        a.acquirer_error_rate,
        a.double_click_rate,
        a.late_retry_rate,
        a.changed_body_rate,
        a.refund_rate,
        a.decline_rate,
        humantime::format_duration(a.lease),
        humantime::format_duration(a.attempt_timeout),
        humantime::format_duration(a.call_budget),
    );
    if a.store == StoreKind::Sqlite {
        command.push_str(" --store sqlite");
    }
    if a.pg_ha {
        command.push_str(&format!(
            " --pg-ha --pg-failovers {} --pg-ha-base-port {}",
            a.pg_failovers, a.pg_ha_base_port
        ));
        if a.pg_leader_freezes > 0 {
            command.push_str(&format!(" --pg-leader-freezes {}", a.pg_leader_freezes));
        }
        if a.etcd_member_kills > 0 {
            command.push_str(&format!(" --etcd-member-kills {}", a.etcd_member_kills));
        }
        if a.pg_failover_with_patroni {
            command.push_str(" --pg-failover-with-patroni");
        }
    }
    if a.no_webhooks {
        command.push_str(" --no-webhooks");
    } else {
        command.push_str(&format!(
            " --webhook-duplicate-rate {} --webhook-reorder-rate {} --webhook-hangup-rate {}",
            a.webhook_duplicate_rate, a.webhook_reorder_rate, a.webhook_hangup_rate
        ));
    }
    if let Some(sabotage) =
        clap::ValueEnum::to_possible_value(&a.sabotage).filter(|_| a.sabotage != Sabotage::None)
    {
        command.push_str(&format!(" --sabotage {}", sabotage.get_name()));
    }
    if a.acquirer_without_keys {
        command.push_str(&format!(
            " --acquirer-without-keys --settle-window {}",
            humantime::format_duration(a.settle_window)
        ));
    } else {
        command.push_str(&format!(
            " --settle-window {}",
            humantime::format_duration(a.settle_window)
        ));
    }
    let modes: Vec<String> = a
        .in_flight_duplicate
        .iter()
        .map(|mode| mode.to_string())
        .collect();
    command.push_str(&format!(
        " --cancel-rate {} --authorize-rate {} --authorization-ttl {} --acquirer-late-rate {} --in-flight-duplicate {}",
        a.cancel_rate,
        a.authorize_rate,
        humantime::format_duration(a.authorization_ttl),
        a.acquirer_late_rate,
        modes.join(",")
    ));
    command
}
