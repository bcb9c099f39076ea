#![allow(clippy::unwrap_used)]
//! The manifest's `rule: cel` sets exactly the conditions, events and metrics the `success`
//! list it replaced did (`allOf: Master` with restart announcements), which the Kubeflow
//! conformance cases were judged against.
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::testing::compare_status_rules;
use kfop_runtime::{RuleWording, StatusRule};

#[test]
fn the_cel_rule_says_what_the_success_list_did() {
    let list = StatusRule::SuccessRules {
        rules: vec![SuccessPolicy::AllOf("Master".to_owned())],
        wording: RuleWording {
            subject: None,
            exit_code_restart_events: true,
        },
    };
    let framework = xgboost_operator::framework(xgboost_operator::Xgboost).unwrap();
    let cel = &framework.manifest().status;
    assert!(matches!(cel, StatusRule::Cel(_)), "{cel:?}");
    // Admission requires the Master; the Worker varies, absent included, in every state.
    let compared = compare_status_rules(
        "XGBoostJob",
        &list,
        cel,
        &["Master", "Worker"],
        &["Master"],
        u64::MAX,
    );
    assert_eq!(compared.unwrap(), 84 * 3 + 84 * 84 * 3);
}
