//! Organization calls of [`CoderClient`]: organizations by ID, name or `default`, their members and their groups,
//! and the writes of organizations and groups (Premium features of Coder).

use reqwest::Method;
use uuid::Uuid;

use super::{CoderClient, Result};
use crate::types::groups::{CreateGroupRequest, Group, PatchGroupRequest};
use crate::types::organizations::{CreateOrganizationRequest, Organization, UpdateOrganizationRequest};
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

    /// `POST /api/v2/organizations` (201; Premium: Multiple Organizations). The caller becomes a member without
    /// roles, and the organization gets its `Everyone` group.
    pub async fn create_organization(&self, request: &CreateOrganizationRequest) -> Result<Organization> {
        self.send_json(Method::POST, &["organizations"], request).await
    }

    /// `PATCH /api/v2/organizations/{organization}` (Premium: Multiple Organizations).
    pub async fn update_organization(
        &self,
        organization: &str,
        request: &UpdateOrganizationRequest,
    ) -> Result<Organization> {
        self.send_json(Method::PATCH, &["organizations", organization], request)
            .await
    }

    /// `DELETE /api/v2/organizations/{organization}` (Premium: Multiple Organizations). Coder refuses the default
    /// organization (400) and one that still holds workspaces, templates, members, groups or provisioner keys
    /// (500, naming them in its detail).
    pub async fn delete_organization(&self, organization: &str) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["organizations", organization], None)
            .await
    }

    /// `POST /api/v2/organizations/{organization}/groups` (201; Premium: Template RBAC).
    pub async fn create_group(&self, organization: &str, request: &CreateGroupRequest) -> Result<Group> {
        self.send_json(Method::POST, &["organizations", organization, "groups"], request)
            .await
    }

    /// `PATCH /api/v2/groups/{id}` (Premium: Template RBAC): the group as it is afterwards, with its members.
    pub async fn patch_group(&self, id: Uuid, request: &PatchGroupRequest) -> Result<Group> {
        self.send_json(Method::PATCH, &["groups", &id.to_string()], request)
            .await
    }

    /// `DELETE /api/v2/groups/{id}` (Premium: Template RBAC; Coder refuses the `Everyone` group).
    pub async fn delete_group(&self, id: Uuid) -> Result<()> {
        self.send_no_content::<()>(Method::DELETE, &["groups", &id.to_string()], None)
            .await
    }
}
