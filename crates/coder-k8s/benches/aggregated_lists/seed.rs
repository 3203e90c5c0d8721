//! Fills the Coder API test server with the benchmark's templates and workspaces, with the operator's own token
//! (the one the aggregated API server uses), and waits until every workspace build has ended so that the lists
//! measured afterwards do not change under the benchmark.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use coder_k8s_coder_client::CoderClient;
use coder_k8s_coder_client::types::{
    ArchiveKind, CreateTemplateRequest, CreateTemplateVersionRequest, CreateWorkspaceRequest,
};
use futures::{StreamExt as _, TryStreamExt as _};
use uuid::Uuid;

/// The Coder user that owns the benchmark's workspaces: the operator's own user.
pub const OWNER: &str = "coder-k8s-operator";

/// Creates `templates` templates (`bench-t<i>`) and `workspaces` workspaces (`bench-w<i>`, spread over the
/// templates) in the default organization; returns the organization's name.
pub async fn fill(client: &CoderClient, templates: usize, workspaces: usize) -> Result<String> {
    let organization = client.default_organization().await?.name;
    let tar = coder_k8s_testenv::one_file_tar("main.tf", b"resource \"null_resource\" \"bench\" {}\n");
    let file = client
        .upload_file(ArchiveKind::Tar, bytes::Bytes::from(tar))
        .await
        .context("uploading the template source")?;
    let template_ids: Vec<Uuid> = futures::stream::iter(0..templates)
        .map(|i| create_template(client, &organization, file.id, format!("bench-t{i}")))
        .buffered(8)
        .try_collect()
        .await?;
    if template_ids.is_empty() {
        bail!("the benchmark needs at least one template");
    }
    futures::stream::iter(0..workspaces)
        .map(|i| {
            let request = CreateWorkspaceRequest {
                template_id: Some(template_ids[i % template_ids.len()]),
                name: format!("bench-w{i}"),
                ..CreateWorkspaceRequest::default()
            };
            async move {
                client
                    .create_workspace(OWNER, &request)
                    .await
                    .with_context(|| format!("creating workspace {}", request.name))
            }
        })
        .buffer_unordered(16)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    wait_settled(client, workspaces).await?;
    Ok(organization)
}

/// One template: a version from the uploaded source, its import, the template.
async fn create_template(client: &CoderClient, organization: &str, file: Uuid, name: String) -> Result<Uuid> {
    let version = client
        .create_template_version(organization, &CreateTemplateVersionRequest::terraform(file))
        .await
        .with_context(|| format!("creating a version for {name}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client
        .template_version(version.id)
        .await?
        .job
        .status
        .is_terminal()
    {
        if Instant::now() >= deadline {
            bail!("the import of {name} did not end within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let request = CreateTemplateRequest {
        name: name.clone(),
        template_version_id: version.id,
        ..CreateTemplateRequest::default()
    };
    let template = client
        .create_template(organization, &request)
        .await
        .with_context(|| format!("creating template {name}"))?;
    Ok(template.id)
}

/// Waits until Coder lists `expected` workspaces and every latest build has ended.
async fn wait_settled(client: &CoderClient, expected: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mut listed = 0;
        let mut active = 0;
        let mut offset = 0;
        loop {
            let page = client.workspaces("", 100, offset).await?;
            let n = page.workspaces.len();
            listed += n;
            active += page
                .workspaces
                .iter()
                .filter(|w| !w.latest_build.job.status.is_terminal())
                .count();
            if n < 100 {
                break;
            }
            offset += 100;
        }
        if listed == expected && active == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{listed} of {expected} workspaces listed, {active} builds still active after 300 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
