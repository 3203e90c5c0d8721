//! Delegated authorization: a SubjectAccessReview per request, with short caches and a `system:masters` bypass.
