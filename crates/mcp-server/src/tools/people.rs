//! Read tools for Coder's organizations, groups and users, through the aggregated `aggregation.coder.com/v1alpha1`
//! CoderOrganization, CoderGroup and CoderUser objects: list and get. No writes (who may change people through an
//! agent needs a design of its own). Never a password or token: the objects hold none.

use std::collections::BTreeMap;

use coder_k8s_api::aggregation::{CoderGroup, CoderOrganization, CoderUser};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::workspaces::{aggregated_api, list_typed, typed};
use super::{McpServer, ObjectRef, kube_error};
use crate::names::Rule;

/// The kind and plural of each aggregated kind these tools read.
const ORGANIZATION: (&str, &str) = ("CoderOrganization", "coderorganizations");
const GROUP: (&str, &str) = ("CoderGroup", "codergroups");
const USER: (&str, &str) = ("CoderUser", "coderusers");

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListPeopleInput {
    /// Namespace to list; every namespace when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationSummary {
    pub name: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    pub is_default: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSummary {
    pub name: String,
    pub namespace: String,
    pub organization: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Members by user name.
    pub members: Vec<String>,
    /// `user`, or `oidc` for a group synced from the identity provider.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserSummary {
    pub name: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub login_type: String,
    /// `active`, `dormant` or `suspended`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Site-wide roles.
    pub roles: Vec<String>,
    /// Each organization the user is a member of, with the roles held there.
    pub organizations: BTreeMap<String, Vec<String>>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListOrganizationsOutput {
    pub items: Vec<OrganizationSummary>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetOrganizationOutput {
    pub organization: OrganizationSummary,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListGroupsOutput {
    pub items: Vec<GroupSummary>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetGroupOutput {
    pub group: GroupSummary,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ListUsersOutput {
    pub items: Vec<UserSummary>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GetUserOutput {
    pub user: UserSummary,
}

pub fn organization_summary(o: &CoderOrganization) -> OrganizationSummary {
    OrganizationSummary {
        name: o.metadata.name.clone().unwrap_or_default(),
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        display_name: o.spec.display_name.clone(),
        is_default: o.status.is_default,
    }
}

pub fn group_summary(g: &CoderGroup) -> GroupSummary {
    GroupSummary {
        name: g.metadata.name.clone().unwrap_or_default(),
        namespace: g.metadata.namespace.clone().unwrap_or_default(),
        organization: g.spec.organization.clone(),
        display_name: g.spec.display_name.clone(),
        members: g.spec.members.clone(),
        source: g.status.source.clone(),
    }
}

pub fn user_summary(u: &CoderUser) -> UserSummary {
    UserSummary {
        name: u.metadata.name.clone().unwrap_or_default(),
        namespace: u.metadata.namespace.clone().unwrap_or_default(),
        email: u.spec.email.clone(),
        login_type: u.spec.login_type.clone(),
        status: u.status.status.clone(),
        roles: u.spec.roles.clone(),
        organizations: u.spec.organizations.clone(),
    }
}

impl McpServer {
    /// One aggregated object of `(kind, plural)`, its name held to `rule` first.
    async fn get_person<T: DeserializeOwned>(
        &self,
        input: &ObjectRef,
        (kind, plural): (&str, &str),
        rule: Rule,
    ) -> Result<T, String> {
        let (namespace, name) = input.checked(rule)?;
        let object = aggregated_api(&self.kube, Some(namespace), kind, plural)
            .get(name)
            .await
            .map_err(|e| kube_error(&format!("get {kind} {namespace}/{name}"), &e))?;
        typed(&object, kind)
    }
}

#[tool_router(router = people_tools, vis = "pub(crate)")]
impl McpServer {
    #[tool(
        description = "List CoderOrganization resources (Coder's organizations).",
        annotations(read_only_hint = true)
    )]
    async fn list_organizations(
        &self,
        Parameters(input): Parameters<ListPeopleInput>,
    ) -> Result<Json<ListOrganizationsOutput>, String> {
        let (kind, plural) = ORGANIZATION;
        let found: Vec<CoderOrganization> =
            list_typed(&self.kube, input.namespace.as_deref(), kind, plural).await?;
        let items = found.iter().map(organization_summary).collect();
        Ok(Json(ListOrganizationsOutput { items }))
    }

    #[tool(
        description = "Get a CoderOrganization resource by namespace and name.",
        annotations(read_only_hint = true)
    )]
    async fn get_organization(
        &self,
        Parameters(input): Parameters<ObjectRef>,
    ) -> Result<Json<GetOrganizationOutput>, String> {
        let rule = Rule::CoderName(ORGANIZATION.0);
        let found: CoderOrganization = self.get_person(&input, ORGANIZATION, rule).await?;
        Ok(Json(GetOrganizationOutput {
            organization: organization_summary(&found),
        }))
    }

    #[tool(
        description = "List CoderGroup resources (Coder's groups with their members).",
        annotations(read_only_hint = true)
    )]
    async fn list_groups(
        &self,
        Parameters(input): Parameters<ListPeopleInput>,
    ) -> Result<Json<ListGroupsOutput>, String> {
        let (kind, plural) = GROUP;
        let found: Vec<CoderGroup> = list_typed(&self.kube, input.namespace.as_deref(), kind, plural).await?;
        let items = found.iter().map(group_summary).collect();
        Ok(Json(ListGroupsOutput { items }))
    }

    #[tool(
        description = "Get a CoderGroup resource by namespace and name (<organization>.<group>).",
        annotations(read_only_hint = true)
    )]
    async fn get_group(
        &self,
        Parameters(input): Parameters<ObjectRef>,
    ) -> Result<Json<GetGroupOutput>, String> {
        let found: CoderGroup = self.get_person(&input, GROUP, Rule::Group).await?;
        Ok(Json(GetGroupOutput {
            group: group_summary(&found),
        }))
    }

    #[tool(
        description = "List CoderUser resources (Coder's users with their roles; never a password or token).",
        annotations(read_only_hint = true)
    )]
    async fn list_users(
        &self,
        Parameters(input): Parameters<ListPeopleInput>,
    ) -> Result<Json<ListUsersOutput>, String> {
        let (kind, plural) = USER;
        let found: Vec<CoderUser> = list_typed(&self.kube, input.namespace.as_deref(), kind, plural).await?;
        let items = found.iter().map(user_summary).collect();
        Ok(Json(ListUsersOutput { items }))
    }

    #[tool(
        description = "Get a CoderUser resource by namespace and user name.",
        annotations(read_only_hint = true)
    )]
    async fn get_user(
        &self,
        Parameters(input): Parameters<ObjectRef>,
    ) -> Result<Json<GetUserOutput>, String> {
        let found: CoderUser = self.get_person(&input, USER, Rule::CoderName(USER.0)).await?;
        Ok(Json(GetUserOutput {
            user: user_summary(&found),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_show_what_an_agent_needs() {
        let user: CoderUser = serde_json::from_value(json!({
            "metadata": {"name": "alice", "namespace": "ns"},
            "spec": {"email": "alice@example.com", "loginType": "oidc", "roles": ["auditor"],
                     "organizations": {"acme": ["organization-admin"]}, "suspended": false},
            "status": {"id": "1", "status": "active"},
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_value(user_summary(&user)).unwrap(),
            json!({"name": "alice", "namespace": "ns", "email": "alice@example.com", "loginType": "oidc",
                   "status": "active", "roles": ["auditor"], "organizations": {"acme": ["organization-admin"]}})
        );
        let group: CoderGroup = serde_json::from_value(json!({
            "metadata": {"name": "acme.Everyone", "namespace": "ns"},
            "spec": {"organization": "acme", "members": ["alice"]},
            "status": {"source": "user", "memberCount": 1},
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_value(group_summary(&group)).unwrap(),
            json!({"name": "acme.Everyone", "namespace": "ns", "organization": "acme", "members": ["alice"],
                   "source": "user"})
        );
    }
}
