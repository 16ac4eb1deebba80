"""The bottom layer: errors, the data model, request/response types, hybrid timestamps, crash
points and the exit hook that closes forgotten clusters."""
