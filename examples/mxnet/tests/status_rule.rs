#![allow(clippy::unwrap_used)]
//! The manifest's `rule: cel` sets exactly the conditions, events and metrics the `success`
//! list it replaced did (`allOf: Scheduler`, else `allOf: Worker`, else every role; `mxjob`
//! wording, restart announcements), which the Kubeflow conformance cases were judged against.
use kfop_runtime::policy::SuccessPolicy;
use kfop_runtime::testing::compare_status_rules;
use kfop_runtime::{RuleWording, StatusRule};

const ROLES: [&str; 6] = [
    "Scheduler",
    "Server",
    "Worker",
    "TunerTracker",
    "TunerServer",
    "Tuner",
];

#[test]
fn the_cel_rule_says_what_the_success_list_did() {
    let list = StatusRule::SuccessRules {
        rules: vec![
            SuccessPolicy::AllOf("Scheduler".to_owned()),
            SuccessPolicy::AllOf("Worker".to_owned()),
        ],
        wording: RuleWording {
            subject: Some("mxjob".to_owned()),
            exit_code_restart_events: true,
        },
    };
    let framework = mxnet_operator::framework(mxnet_operator::Mxnet).unwrap();
    let cel = &framework.manifest().status;
    assert!(matches!(cel, StatusRule::Cel(_)), "{cel:?}");
    // Every set of the six roles present, each after 3 prior conditions: 3 states without any,
    // 84 x 3 with one, 1,500 sampled with two or more.
    let compared = compare_status_rules("MXJob", &list, cel, &ROLES, &[], 1_500);
    assert_eq!(compared.unwrap(), 3 + 6 * 84 * 3 + 57 * 1_500);
}
