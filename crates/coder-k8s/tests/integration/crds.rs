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

/// Applies `manifest` in a fresh namespace, asserting it is accepted; returns the namespace.
async fn accepted(tag: &str, manifest: &str) -> String {
    let cp = control_plane_with_crds().await;
    let ns = cp.namespace(tag).await.expect("namespace").name().to_owned();
    let out = kubectl(cp, &["apply", "-n", &ns, "-f", "-"], Some(manifest));
    assert_success(&out, &format!("apply {manifest}"));
    ns
}

/// `kubectl get <what> -o jsonpath=<path>` in `ns`.
async fn get_path(ns: &str, what: &[&str], path: &str) -> String {
    let cp = control_plane_with_crds().await;
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let jsonpath = format!("jsonpath={path}");
    args.extend_from_slice(&["-n", ns, "-o", &jsonpath]);
    let out = kubectl(cp, &args, None);
    assert_success(&out, &format!("get {what:?}"));
    stdout(&out)
}

#[tokio::test]
async fn control_plane_and_proxy_without_spec_get_the_defaults() {
    let ns = accepted(
        "nospec",
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: bare}
---
apiVersion: coder.com/v1alpha1
kind: CoderWorkspaceProxy
metadata: {name: bare}
"#,
    )
    .await;
    assert_eq!(
        get_path(
            &ns,
            &["codercontrolplane", "bare"],
            "{.spec.image} {.spec.replicas} {.spec.service.type} {.spec.service.port}"
        )
        .await,
        "ghcr.io/coder/coder:latest 1 ClusterIP 80"
    );
    assert_eq!(
        get_path(
            &ns,
            &["coderworkspaceproxy", "bare"],
            "{.spec.image} {.spec.service.type} {.spec.service.port}"
        )
        .await,
        "ghcr.io/coder/coder:latest ClusterIP 80"
    );
}

#[tokio::test]
async fn what_v015_accepted_stays_accepted() {
    let ns = accepted(
        "v015",
        r#"
apiVersion: coder.com/v1alpha1
kind: CoderControlPlane
metadata: {name: loose}
spec:
  replicas: 0
  service: {type: "", port: 8080}
  imagePullSecrets: [{}]
  readinessProbe: {enabled: true, periodSeconds: 0}
  resources:
    requests: {cpu: 1, memory: 512Mi}
    limits: {cpu: "1.5", memory: 1e9}
  extraEnv:
    - name: FROM_FILE
      valueFrom:
        fileKeyRef: {volumeName: env, path: app.env, key: FROM_FILE}
    - name: LIMIT
      valueFrom:
        resourceFieldRef: {resource: limits.memory, divisor: 1Mi}
  volumes:
    - name: scratch
      emptyDir: {sizeLimit: 1Gi}
    - name: cert
      projected:
        sources:
          - podCertificate: {signerName: example.com/signer, keyType: ED25519, credentialBundlePath: bundle.pem}
---
apiVersion: coder.com/v1alpha1
kind: CoderProvisioner
metadata: {name: loose}
spec:
  controlPlaneRef: {}
  terminationGracePeriodSeconds: 0
  extraArgs: ["--verbose", "--url-is-not-this-flag"]
  extraEnv:
    - {name: coder_url, value: "lower case is another variable"}
    - {name: CODER_URL_EXTRA, value: x}
---
apiVersion: coder.com/v1alpha1
kind: CoderWorkspaceProxy
metadata: {name: loose}
spec:
  service: {type: ""}
  extraArgs: ["--verbose", "--url=https://coder.example.com"]
  extraEnv:
    - {name: CODER_URL, value: "not the proxy's primary URL"}
    - {name: coder_primary_access_url, value: x}
"#,
    )
    .await;
    assert_eq!(
        get_path(
            &ns,
            &["codercontrolplane", "loose"],
            "{.spec.service.type}|{.spec.extraEnv[0].valueFrom.fileKeyRef.path}|{.spec.volumes[1].projected.sources[0].podCertificate.signerName}|{.spec.imagePullSecrets[0].name}"
        ).await,
        "|app.env|example.com/signer|",
        "the empty service type is kept (the controller treats it as ClusterIP); new Kubernetes fields are not pruned"
    );
    assert_eq!(
        get_path(&ns, &["coderprovisioner", "loose"], "{.spec.controlPlaneRef}").await,
        r#"{"name":""}"#
    );
}

#[tokio::test]
async fn invalid_quantities_are_rejected_at_admission() {
    for (field, manifest) in [
        (
            "spec.resources.requests.cpu",
            "spec: {resources: {requests: {cpu: lots}}}",
        ),
        (
            "spec.extraEnv[0].valueFrom.resourceFieldRef.divisor",
            "spec: {extraEnv: [{name: X, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: one}}}]}",
        ),
        (
            "spec.volumes[0].emptyDir.sizeLimit",
            "spec: {volumes: [{name: v, emptyDir: {sizeLimit: 1GB}}]}",
        ),
    ] {
        let message = rejected(&format!(
            "apiVersion: coder.com/v1alpha1\nkind: CoderControlPlane\nmetadata: {{name: quantity}}\n{manifest}\n"
        ))
        .await;
        assert!(
            message.contains(field) && message.contains("should match"),
            "{field}: {message}"
        );
    }
}

/// Each way to point the pods at another Coder URL than the operator's is refused with its message.
#[tokio::test]
async fn extra_env_and_args_cannot_override_the_coder_url() {
    use coder_k8s_api::{provisioner, workspace_proxy};
    let provisioner_spec = "controlPlaneRef: {name: cp}";
    let cases = [
        (
            "CoderProvisioner",
            provisioner_spec,
            "extraEnv: [{name: CODER_URL, value: \"https://evil.example\"}]",
            provisioner::URL_ENV_MESSAGE,
        ),
        (
            "CoderProvisioner",
            provisioner_spec,
            "extraEnv: [{name: CODER_URL, valueFrom: {configMapKeyRef: {name: c, key: k}}}]",
            provisioner::URL_ENV_MESSAGE,
        ),
        (
            "CoderProvisioner",
            provisioner_spec,
            "extraArgs: [\"--url=https://evil.example\"]",
            provisioner::URL_ARG_MESSAGE,
        ),
        (
            "CoderProvisioner",
            provisioner_spec,
            "extraArgs: [\"--verbose\", \"--url\", \"https://evil.example\"]",
            provisioner::URL_ARG_MESSAGE,
        ),
        (
            "CoderWorkspaceProxy",
            "",
            "extraEnv: [{name: CODER_PRIMARY_ACCESS_URL, value: \"https://evil.example\"}]",
            workspace_proxy::PRIMARY_ACCESS_URL_ENV_MESSAGE,
        ),
        (
            "CoderWorkspaceProxy",
            "",
            "extraArgs: [\"--primary-access-url=https://evil.example\"]",
            workspace_proxy::PRIMARY_ACCESS_URL_ARG_MESSAGE,
        ),
        (
            "CoderWorkspaceProxy",
            "",
            "extraArgs: [\"--primary-access-url\", \"https://evil.example\"]",
            workspace_proxy::PRIMARY_ACCESS_URL_ARG_MESSAGE,
        ),
    ];
    for (kind, base, field, expected) in cases {
        let message = rejected(&format!(
            "apiVersion: coder.com/v1alpha1\nkind: {kind}\nmetadata: {{name: override}}\nspec:\n  {base}\n  {field}\n"
        ))
        .await;
        assert!(message.contains(expected), "{kind} {field}: {message}");
    }
}

/// An object the controller has not written a status to yet: Flux's CEL names `status` as a variable, so the kinds
/// with shipped Flux health checks show `status: {}` until then, and both GitOps rules say "in progress" instead of
/// failing.
#[tokio::test]
async fn a_new_object_without_a_status_is_in_progress_for_flux_and_argo_cd() {
    let cases = [
        (
            "CoderTemplateTest",
            "config/gitops/flux-healthcheck-codertemplatetest.yaml",
            "config/gitops/argocd-health-codertemplatetest.lua",
            "apiVersion: coder.com/v1alpha1\nkind: CoderTemplateTest\nmetadata: {name: fresh}\nspec:\n  controlPlaneRef: {name: none}\n  template: acme.docker\n  version: {active: true}\n",
        ),
        (
            "CoderMCPServer",
            "config/gitops/flux-healthcheck-codermcpserver.yaml",
            "config/gitops/argocd-health-codermcpserver.lua",
            "apiVersion: coder.com/v1alpha1\nkind: CoderMCPServer\nmetadata: {name: fresh}\nspec:\n  controlPlaneRef: {name: none}\n  organization: acme\n  slug: tools\n  displayName: Tools\n  url: https://mcp.example.com\n  transport: streamable_http\n",
        ),
    ];
    for (kind, flux_rule, argocd_rule, manifest) in cases {
        let ns = accepted("fresh-status", manifest).await;
        let cp = control_plane_with_crds().await;
        let out = kubectl(cp, &["get", kind, "fresh", "-n", &ns, "-o", "json"], None);
        assert_success(&out, kind);
        let object: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(object["status"], serde_json::json!({}), "{kind}: {object}");
        assert_eq!(
            crate::support::flux_health(flux_rule, kind, &object),
            "InProgress",
            "{kind}"
        );
        let (status, _) = crate::support::argocd_health(argocd_rule, &object);
        assert_eq!(status, "Progressing", "{kind}");
    }
}
