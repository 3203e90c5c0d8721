//! Deployment-wide calls of [`CoderClient`]: build info, entitlements and licenses.

use reqwest::Method;

use super::{CoderClient, Result};
use crate::secret::Secret;
use crate::types::BuildInfo;
use crate::types::entitlements::Entitlements;
use crate::types::licenses::{AddLicenseRequest, License};

impl CoderClient {
    /// `GET /api/v2/buildinfo` (no auth); carries `deployment_id`.
    pub async fn buildinfo(&self) -> Result<BuildInfo> {
        self.get_json(&["buildinfo"], &[]).await
    }

    /// `GET /api/v2/entitlements`. An AGPL build answers `Route not found.`
    /// ([`crate::Error::is_route_not_found`]): read that as "not supported".
    pub async fn entitlements(&self) -> Result<Entitlements> {
        self.get_json(&["entitlements"], &[]).await
    }

    /// `GET /api/v2/licenses`.
    pub async fn licenses(&self) -> Result<Vec<License>> {
        self.get_json(&["licenses"], &[]).await
    }

    /// `POST /api/v2/licenses` (201). A duplicate JWT fails with a 500 whose message matches
    /// [`License::is_duplicate_message`].
    pub async fn upload_license(&self, jwt: &Secret) -> Result<License> {
        let body = AddLicenseRequest { license: jwt.clone() };
        self.send_json(Method::POST, &["licenses"], &body).await
    }
}
