//! Cleanup records and the sweep on the real kube-apiserver and the Coder API test server: objects that go without
//! their delete in Coder (as in a namespace deletion) leave records; while the control plane reaches another
//! deployment the records are unmatched (gauge, Warning Event); once the same deployment is back, the sweep deletes
//! exactly their leftovers. Records the operator did not sign (forged by a ConfigMap writer) are never swept, and
//! delete nothing; a signed record saved and re-created later is not taken for a recent one.

use coder_k8s_api::ai_gateway_key::{CoderAIGatewayKey, key_name_prefix};
use coder_k8s_api::ai_provider::CoderAIProvider;
use coder_k8s_api::mcp_server::CoderMCPServer;
use coder_k8s_coder_testserver::{Fault, FaultRule};
use coder_k8s_controllers::cleanup_records::record::{Created, Record, RecordKind, record_name};
use coder_k8s_controllers::cleanup_records::signing::{KEY_DATA, KEY_SECRET, SigningKey};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Resource;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::ai_gateway_key::{KEYS, create_key_object, setup, uid_of};
use crate::ai_provider::{PROVIDERS, create_object, foreign_provider};
use crate::control_plane::{Harness, harness};
use crate::support::wait_for;

/// Removes the object without its cleanup, as a namespace deletion does once Coder's pods are gone.
async fn remove_without_cleanup<K>(h: &Harness, name: &str)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    let api = h.api::<K>();
    let patch = json!({"metadata": {"finalizers": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(
        || async { api.get_opt(name).await.unwrap().is_none() },
        "the object to go",
    )
    .await;
}

async fn no_matching_deployment_events(h: &Harness, record: &str) -> usize {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = h.api();
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("NoMatchingDeployment"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(record))
        .count()
}

fn record(h: &Harness, kind: RecordKind, uid: &str, deployment: &str, created: Created) -> ConfigMap {
    Record {
        kind,
        namespace: h.ns.clone(),
        name: "never-existed".to_owned(),
        uid: uid.to_owned(),
        deployment_id: deployment.to_owned(),
        created,
    }
    .to_config_map(&h.ns)
}

fn records_api(h: &Harness) -> kube::Api<ConfigMap> {
    h.api::<ConfigMap>()
}

fn counts(h: &Harness) -> ((u64, i64, u64), (u64, i64, u64)) {
    (
        h.metrics.cleanup_counts("CoderAIGatewayKey"),
        h.metrics.cleanup_counts("CoderAIProvider"),
    )
}

#[tokio::test]
async fn the_sweep_deletes_exactly_the_leftovers_once_the_same_deployment_is_back() {
    let h = harness("sweep").await;
    let token = setup(&h, true).await;
    let coder = h.coder(&token);
    let deployment = h.server.deployment_id();
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    let orphan_key = uid_of(&create_key_object(&h, "orphan").await);
    create_key_object(&h, "kept").await;
    let orphan_provider = create_object(&h, "orphan-provider", crate::ai_provider::spec())
        .await
        .metadata
        .uid
        .unwrap();
    let orphan_key_id = crate::ai_gateway_key::wait_reason(&h, "orphan", "KeyReady")
        .await
        .current_key
        .unwrap()
        .id;
    let kept_key_id = crate::ai_gateway_key::wait_reason(&h, "kept", "KeyReady")
        .await
        .current_key
        .unwrap()
        .id;
    let provider_id = crate::ai_provider::wait_reason(&h, "orphan-provider", "Synced")
        .await
        .provider_id
        .unwrap();
    let organization = coder.default_organization().await.unwrap();
    crate::mcp_server::allow_organizations(&h, json!([organization.name])).await;
    let orphan_mcp =
        crate::mcp_server::create_server(&h, "orphan-mcp", crate::mcp_server::spec(&organization.name))
            .await
            .metadata
            .uid
            .unwrap();
    let server_id = crate::mcp_server::wait_reason(&h, "orphan-mcp", "Synced")
        .await
        .server_id
        .unwrap();
    let mcp_record = records_api(&h)
        .get(&record_name(&orphan_mcp))
        .await
        .unwrap()
        .data
        .unwrap();
    assert_eq!(
        mcp_record["serverID"], server_id,
        "MCP server configs get cleanup records too"
    );
    assert_eq!(mcp_record["organizationID"], organization.id.to_string());

    // What the operator did not create: the user's own key and provider, with forged records aimed at them.
    let own_key = coder
        .create_ai_gateway_key("my-own-key")
        .await
        .unwrap()
        .id
        .to_string();
    let own_provider = foreign_provider(&coder, "their-provider").await;
    let forged_key = "00000000-0000-4000-8000-000000000001";
    let forged_provider = "00000000-0000-4000-8000-000000000002";
    let records = h.api::<ConfigMap>();
    for forged in [
        record(
            &h,
            RecordKind::AIGatewayKey,
            forged_key,
            &deployment,
            Created::KeyPrefix(key_name_prefix(forged_key)),
        ),
        record(
            &h,
            RecordKind::AIProvider,
            forged_provider,
            &deployment,
            Created::Provider {
                name: "their-provider".to_owned(),
                id: Some(own_provider.clone()),
            },
        ),
    ] {
        records.create(&PostParams::default(), &forged).await.unwrap();
    }

    // The control plane now reaches another Coder database; the objects go without their delete.
    h.server.set_deployment_id("00000000-0000-4000-8000-00000000beef");
    remove_without_cleanup::<CoderAIGatewayKey>(&h, "orphan").await;
    remove_without_cleanup::<CoderAIProvider>(&h, "orphan-provider").await;
    remove_without_cleanup::<CoderMCPServer>(&h, "orphan-mcp").await;
    // Only the operator's own (signed) records count; the forged ones are left alone.
    wait_for(
        || async {
            counts(&h).0.1 == 1 && counts(&h).1.1 == 1 && h.metrics.cleanup_counts("CoderMCPServer").1 == 1
        },
        "unmatched records",
    )
    .await;
    for uid in [&orphan_key, &orphan_provider] {
        let name = record_name(uid);
        wait_for(
            || async { no_matching_deployment_events(&h, &name).await >= 1 },
            "the NoMatchingDeployment Event",
        )
        .await;
    }
    assert_eq!(
        h.server.ai_gateway_keys().len(),
        3,
        "nothing is deleted in another deployment"
    );
    assert!(coder.ai_provider(&provider_id).await.is_ok());

    // The same Coder database is back: exactly the orphans' key and provider go, then their records.
    h.server.clear_requests();
    h.server.set_deployment_id(&deployment);
    wait_for(
        || async {
            counts(&h).0.0 == 1 && counts(&h).1.0 == 1 && h.metrics.cleanup_counts("CoderMCPServer").0 == 1
        },
        "swept records",
    )
    .await;
    let mut keys: Vec<String> = h.server.ai_gateway_keys().into_iter().map(|(id, _)| id).collect();
    keys.sort();
    let mut expected = vec![kept_key_id, own_key];
    expected.sort();
    assert_eq!(keys, expected);
    assert!(coder.ai_provider(&provider_id).await.unwrap_err().is_not_found());
    assert!(
        coder.ai_provider(&own_provider).await.is_ok(),
        "a forged record deletes nothing"
    );
    let mut deletes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    deletes.sort();
    let mut expected = vec![
        format!("{KEYS}/{orphan_key_id}"),
        format!("{PROVIDERS}/{provider_id}"),
        format!(
            "/api/v2/organizations/{}/mcp-servers/{server_id}",
            organization.id
        ),
    ];
    expected.sort();
    assert_eq!(deletes, expected, "the whole request log");
    assert!(
        crate::mcp_server::config(&h, "orphan-mcp").is_none(),
        "the config is gone"
    );
    for gone in [orphan_key.as_str(), orphan_provider.as_str(), orphan_mcp.as_str()] {
        assert!(
            records.get_opt(&record_name(gone)).await.unwrap().is_none(),
            "{gone}"
        );
    }
    for forged in [forged_key, forged_provider] {
        let kept = records.get_opt(&record_name(forged)).await.unwrap();
        assert!(kept.is_some(), "a record the operator did not sign stays");
    }
    assert_eq!(counts(&h).0.1, 0);
}

#[tokio::test]
async fn a_namespace_deletion_leaves_records_for_what_stays_in_coder() {
    // Records live in a namespace of their own, as in coder-system, so the deletion does not take them along.
    let operator_namespace = format!("ops-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let records_ns = operator_namespace.clone();
    let h = crate::control_plane::harness_with("nsdel", move |s| s.operator_namespace = records_ns).await;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(h.admin.clone());
    let ops = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(operator_namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ops).await.unwrap();
    let token = setup(&h, true).await;
    let coder = h.coder(&token);
    h.put_secret("openai", &[("api-key", "sk-test-0001")]).await;
    let key_uid = uid_of(&create_key_object(&h, "gateway").await);
    let provider_uid = create_object(&h, "openai", crate::ai_provider::spec())
        .await
        .metadata
        .uid
        .unwrap();
    crate::ai_gateway_key::wait_reason(&h, "gateway", "KeyReady").await;
    let provider_id = crate::ai_provider::wait_reason(&h, "openai", "Synced")
        .await
        .provider_id
        .unwrap();

    // The namespace goes: Coder's pods go with it (Coder answers nothing any more), and the namespace controller
    // deletes every object in it. (The test control plane has no namespace controller; the test deletes them.)
    h.server.add_fault(coder_k8s_coder_testserver::FaultRule {
        method: None,
        path_prefix: "/api/v2/".to_owned(),
        fault: coder_k8s_coder_testserver::Fault::DropConnection,
        times: None,
    });
    namespaces.delete(&h.ns, &DeleteParams::default()).await.unwrap();
    h.api::<CoderAIGatewayKey>()
        .delete("gateway", &DeleteParams::default())
        .await
        .unwrap();
    h.api::<CoderAIProvider>()
        .delete("openai", &DeleteParams::default())
        .await
        .unwrap();
    let control_planes = h.api::<coder_k8s_api::control_plane::CoderControlPlane>();
    control_planes
        .delete("codercontrolplane-sample", &DeleteParams::default())
        .await
        .unwrap();
    for gone in ["gateway", "openai"] {
        let keys = h.api::<CoderAIGatewayKey>();
        let providers = h.api::<CoderAIProvider>();
        wait_for(
            || async {
                keys.get_opt(gone).await.unwrap().is_none()
                    && providers.get_opt(gone).await.unwrap().is_none()
            },
            "the AI objects to go",
        )
        .await;
    }
    // Released without a delete in Coder: the key and the provider stay there, and so do their records.
    assert_eq!(counts(&h).0.2, 1);
    assert_eq!(counts(&h).1.2, 1);
    h.server.clear_faults();
    assert_eq!(h.server.ai_gateway_keys().len(), 1);
    assert!(coder.ai_provider(&provider_id).await.is_ok());
    let records: kube::Api<ConfigMap> = kube::Api::namespaced(h.admin.clone(), &operator_namespace);
    for uid in [&key_uid, &provider_uid] {
        assert!(
            records.get_opt(&record_name(uid)).await.unwrap().is_some(),
            "{uid}"
        );
    }
    // No control plane reaches their deployment: both are counted as unmatched.
    wait_for(
        || async { counts(&h).0.1 == 1 && counts(&h).1.1 == 1 },
        "unmatched records",
    )
    .await;
    namespaces
        .delete(&operator_namespace, &DeleteParams::default())
        .await
        .unwrap();
}

/// The operator's record-signing key, read from its Secret (in the test's namespace, the harness's operator
/// namespace) once the operator created it.
async fn operator_signing_key(h: &Harness) -> SigningKey {
    let secrets = h.api::<Secret>();
    wait_for(
        || async { secrets.get_opt(KEY_SECRET).await.unwrap().is_some() },
        "the signing key",
    )
    .await;
    let secret = secrets.get(KEY_SECRET).await.unwrap();
    SigningKey::new(secret.data.unwrap()[KEY_DATA].0.clone().try_into().unwrap())
}

/// A signed record of a gone object whose provider create was sent but never answered (no ID), written at `written`.
fn pending_provider_record(h: &Harness, key: &SigningKey, provider: &str, written: Timestamp) -> ConfigMap {
    let record = Record {
        kind: RecordKind::AIProvider,
        namespace: h.ns.clone(),
        name: "gone".to_owned(),
        uid: uuid::Uuid::new_v4().to_string(),
        deployment_id: h.server.deployment_id(),
        created: Created::Provider {
            name: provider.to_owned(),
            id: None,
        },
    };
    key.signed_config_map(&record, written, &h.ns)
}

/// Lets the sweep see `record` only once Coder holds a provider named `provider` created after the record's
/// ConfigMap: provider reads fail until then, so every pass keeps the record for later.
async fn sweep_after_a_provider_is_created(
    h: &Harness,
    coder: &coder_k8s_coder_client::CoderClient,
    record: &ConfigMap,
    provider: &str,
) -> String {
    h.server.add_fault(FaultRule {
        method: Some("GET".to_owned()),
        path_prefix: PROVIDERS.to_owned(),
        fault: Fault::ServerError(503),
        times: None,
    });
    records_api(h)
        .create(&PostParams::default(), record)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let id = foreign_provider(coder, provider).await;
    h.server.clear_faults();
    id
}

#[tokio::test]
async fn a_saved_signed_record_re_created_later_is_not_recent_and_sweeps_nothing() {
    let h = harness("sweep-replay").await;
    let coder = h.coder(&setup(&h, true).await);
    let key = operator_signing_key(&h).await;

    // A copy saved two hours ago and re-created now: Coder's provider is newer than the ConfigMap, not than the
    // record's signed time.
    let two_hours = SignedDuration::from_hours(2);
    let saved = pending_provider_record(&h, &key, "victim", Timestamp::now() - two_hours);
    let victim = sweep_after_a_provider_is_created(&h, &coder, &saved, "victim").await;
    let kept = saved.metadata.name.clone().unwrap();
    crate::support::several_requeues().await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(
        coder.ai_provider(&victim).await.is_ok(),
        "the victim's provider stays"
    );
    assert!(
        records_api(&h).get_opt(&kept).await.unwrap().is_some(),
        "the record stays for an admin"
    );

    // The same record written now (as the operator writes it before a create) is recent: its provider goes.
    let fresh = pending_provider_record(&h, &key, "lost-answer", Timestamp::now());
    let leftover = sweep_after_a_provider_is_created(&h, &coder, &fresh, "lost-answer").await;
    wait_for(
        || async {
            coder
                .ai_provider(&leftover)
                .await
                .is_err_and(|e| e.is_not_found())
        },
        "the leftover of a recent record swept",
    )
    .await;
    let deletes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        deletes,
        vec![format!("{PROVIDERS}/{leftover}")],
        "the whole request log"
    );
    assert!(coder.ai_provider(&victim).await.is_ok());
}
