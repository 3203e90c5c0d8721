//! Organization calls of [`CoderClient`]: organizations by ID, name or `default`, their members and their groups.

use uuid::Uuid;

use super::{CoderClient, Result};
use crate::types::groups::Group;
use crate::types::organizations::Organization;
use crate::types::users::OrganizationMember;

impl CoderClient {
    /// `GET /api/v2/organizations`.
    pub async fn organizations(&self) -> Result<Vec<Organization>> {
        self.get_json(&["organizations"], &[]).await
    }

    /// `GET /api/v2/organizations/{organization}`: a UUID, a name, or `default`.
    pub async fn organization(&self, organization: &str) -> Result<Organization> {
        self.get_json(&["organizations", organization], &[]).await
    }

    /// `GET /api/v2/organizations/{id}`.
    pub async fn organization_by_id(&self, id: Uuid) -> Result<Organization> {
        self.organization(&id.to_string()).await
    }

    /// The default organization (`GET /api/v2/organizations/default`).
    pub async fn default_organization(&self) -> Result<Organization> {
        self.organization("default").await
    }

    /// `GET /api/v2/organizations/{organization}/members`: every member with its roles in the organization.
    pub async fn organization_members(&self, organization: &str) -> Result<Vec<OrganizationMember>> {
        self.get_json(&["organizations", organization, "members"], &[])
            .await
    }

    /// `GET /api/v2/organizations/{organization}/groups/{name}`: a group by its exact name (premium: Template RBAC;
    /// 404 when the organization has no such group).
    pub async fn group_by_name(&self, organization: &str, name: &str) -> Result<Group> {
        self.get_json(&["organizations", organization, "groups", name], &[])
            .await
    }

    /// `GET /api/v2/organizations/{organization}/groups`.
    pub async fn groups(&self, organization: &str) -> Result<Vec<Group>> {
        self.get_json(&["organizations", organization, "groups"], &[])
            .await
    }
}
