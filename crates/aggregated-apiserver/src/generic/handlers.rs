//! The verb handlers: get, list, watch, create, update, patch and delete over a resource's storage.
