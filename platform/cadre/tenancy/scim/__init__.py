"""SCIM 2.0 provisioning (RFC 7643/7644): identity providers create and retire members."""
