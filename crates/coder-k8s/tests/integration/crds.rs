//! The generated CRDs on a real kube-apiserver: they install, the samples apply with kubectl, CEL rules reject
//! invalid objects with v0.1.5's messages, `kubectl explain` and printer columns work.

use crate::support::{assert_success, control_plane_with_crds, kubectl, path, stderr, stdout};

const ALL_PLURALS: &[&str] = &[
    "codercontrolplanes",
    "coderprovisioners",
    "coderworkspaceproxies",
    "codertemplatetests",
    "coderaiproviders",
    "coderaigatewaykeys",
    "codermcpservers",
];

#[tokio::test]
async fn every_crd_is_established() {
    let cp = control_plane_with_crds().await;
    for plural in ALL_PLURALS {
        let out = kubectl(
            cp,
            &[
                "get",
                "crd",
                &format!("{plural}.coder.com"),
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
            ],
            None,
        );
        assert_success(&out, plural);
        assert_eq!(stdout(&out), "True", "{plural} not Established");
    }
}

#[tokio::test]
async fn samples_apply_with_kubectl() {
    let cp = control_plane_with_crds().await;
    let out = kubectl(cp, &["create", "namespace", "coder"], None);
    assert!(
        out.status.success() || stderr(&out).contains("AlreadyExists"),
        "{}",
        stderr(&out)
    );
    let out = kubectl(cp, &["apply", "-f", &path("config/samples")], None);
    assert_success(&out, "kubectl apply -f config/samples/");
    let applied = stdout(&out);
    for name in [
        "codercontrolplane.coder.com/codercontrolplane-sample",
        "coderprovisioner.coder.com/coderprovisioner-sample",
        "coderworkspaceproxy.coder.com/coderworkspaceproxy-sample",
        "codertemplatetest.coder.com/codertemplatetest-sample",
        "coderaiprovider.coder.com/coderaiprovider-sample",
        "coderaigatewaykey.coder.com/coderaigatewaykey-sample",
        "codermcpserver.coder.com/codermcpserver-sample",
    ] {
        assert!(applied.contains(name), "{name} missing in: {applied}");
    }
    // Defaults from the schema are applied by the apiserver.
    let out = kubectl(
        cp,
        &[
            "get",
            "coderprovisioner",
            "coderprovisioner-sample",
            "-n",
            "coder",
            "-o",
            "jsonpath={.spec.organizationName} {.spec.terminationGracePeriodSeconds}",
        ],
        None,
    );
    assert_eq!(stdout(&out), "default 600");
    let out = kubectl(
        cp,
        &[
            "get",
            "codercontrolplane",
            "codercontrolplane-sample",
            "-n",
            "coder",
            "-o",
            "jsonpath={.spec.replicas} {.spec.service.type} {.spec.service.port} {.spec.envUseClusterAccessURL}",
        ],
        None,
    );
    assert_eq!(stdout(&out), "1 ClusterIP 80 true");
}

/// Applies `manifest` (namespace `ns`) and returns kubectl's stderr, asserting the apply failed.
async fn rejected(manifest: &str) -> String {
    let cp = control_plane_with_crds().await;
    let ns = cp.namespace("cel").await.expect("namespace").name().to_owned();
    let out = kubectl(cp, &["apply", "-n", &ns, "-f", "-"], Some(manifest));
    assert!(
        !out.status.success(),
        "expected a rejection, got: {}",
        stdout(&out)
    );
    stderr(&out)
}

#[tokio::test]
async fn expose_with_ingress_and_gateway_is_rejected() {
    let message = rejected(
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: both}
spec:
  expose:
    ingress: {host: coder.example.com}
    gateway: {host: coder.example.com, parentRefs: [{name: gw}]}
"#,
    )
    .await;
    assert!(
        message.contains("only one of ingress or gateway may be set"),
        "{message}"
    );
}

#[tokio::test]
async fn database_with_pg_url_in_extra_env_is_rejected() {
    let message = rejected(
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: conflict}
spec:
  database:
    connectionSecretRef: {name: coder-db-app, key: uri}
  extraEnv:
    - {name: CODER_PG_CONNECTION_URL, value: "postgres://x"}
"#,
    )
    .await;
    assert!(
        message.contains(
            "spec.extraEnv must not set CODER_PG_CONNECTION_URL when spec.database.connectionSecretRef is set"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn database_secret_ref_needs_name_and_key() {
    let message = rejected(
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: nokey}
spec:
  database:
    connectionSecretRef: {name: coder-db-app}
"#,
    )
    .await;
    assert!(
        message.contains("connectionSecretRef.key must not be empty"),
        "{message}"
    );
    let message = rejected(
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: noname}
spec:
  database:
    connectionSecretRef: {name: "", key: uri}
"#,
    )
    .await;
    assert!(
        message.contains("connectionSecretRef.name must not be empty"),
        "{message}"
    );
}

#[tokio::test]
async fn env_from_with_both_sources_is_rejected() {
    let message = rejected(
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: envfrom}
spec:
  envFrom:
    - configMapRef: {name: a}
      secretRef: {name: b}
"#,
    )
    .await;
    assert!(
        message.contains("each envFrom entry may specify at most one of configMapRef or secretRef"),
        "{message}"
    );
}

const TEMPLATE_TEST: &str = r#"
apiVersion: coder.com/v1alpha1
kind: CoderTemplateTest
metadata: {name: tt}
spec:
  controlPlaneRef: {name: codercontrolplane-sample}
  template: TEMPLATE
  version: VERSION
"#;

fn template_test(template: &str, version: &str) -> String {
    TEMPLATE_TEST
        .replace("TEMPLATE", template)
        .replace("VERSION", version)
}

#[tokio::test]
async fn template_test_rules() {
    let message = rejected(&template_test("no-dot-here", "{active: true}")).await;
    assert!(
        message.contains("spec.template") && message.contains("should match"),
        "{message}"
    );
    let message = rejected(&template_test("coder.new", "{active: true}")).await;
    assert!(
        message.contains("organization and template names must not be new or create"),
        "{message}"
    );
    let long = format!("coder.{}", "a".repeat(33));
    let message = rejected(&template_test(&long, "{active: true}")).await;
    assert!(
        message.contains("organization and template names must each have at most 32 characters"),
        "{message}"
    );
    let message = rejected(&template_test("coder.docker", "{name: v1, active: true}")).await;
    assert!(
        message.contains("set exactly one of name, id, or active"),
        "{message}"
    );
    let message = rejected(&template_test("coder.docker", "{active: false}")).await;
    assert!(message.contains("active must be true when set"), "{message}");
}

#[tokio::test]
async fn template_test_spec_is_immutable() {
    let cp = control_plane_with_crds().await;
    let ns = cp
        .namespace("immutable")
        .await
        .expect("namespace")
        .name()
        .to_owned();
    let manifest = template_test("coder.docker", "{active: true}");
    let out = kubectl(cp, &["apply", "-n", &ns, "-f", "-"], Some(&manifest));
    assert_success(&out, "create template test");
    let changed = manifest.replace("coder.docker", "coder.other");
    let out = kubectl(cp, &["apply", "-n", &ns, "-f", "-"], Some(&changed));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec is immutable, create a new CoderTemplateTest"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn kubectl_explain_shows_field_descriptions() {
    let cp = control_plane_with_crds().await;
    // Discovery of a freshly installed CRD's OpenAPI can lag a little.
    let mut last = String::new();
    for _ in 0..30 {
        let out = kubectl(cp, &["explain", "codercontrolplane.spec.database"], None);
        last = format!("{}{}", stdout(&out), stderr(&out));
        if out.status.success() && last.contains("connectionSecretRef") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert!(
        last.contains("PostgreSQL connection of the Coder server"),
        "{last}"
    );
    assert!(last.contains("connectionSecretRef"), "{last}");
}

#[tokio::test]
async fn provisioner_printer_columns() {
    let cp = control_plane_with_crds().await;
    let ns = cp
        .namespace("columns")
        .await
        .expect("namespace")
        .name()
        .to_owned();
    let manifest = r#"
apiVersion: coder.com/v1alpha1
kind: CoderProvisioner
metadata: {name: p1}
spec:
  controlPlaneRef: {name: codercontrolplane-sample}
"#;
    assert_success(
        &kubectl(cp, &["apply", "-n", &ns, "-f", "-"], Some(manifest)),
        "create provisioner",
    );
    let out = kubectl(cp, &["get", "coderprovisioners", "-n", &ns], None);
    assert_success(&out, "get coderprovisioners");
    let header = stdout(&out).lines().next().unwrap_or_default().to_owned();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns, ["NAME", "PHASE", "REPLICAS", "AGE"], "{header}");
}
