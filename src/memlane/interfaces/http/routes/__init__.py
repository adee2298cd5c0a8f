"""The API's routers: users and keys (admin), memories and search (a user's key), operations."""
