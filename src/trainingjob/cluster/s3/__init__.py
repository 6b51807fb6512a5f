"""An S3 server for the local cluster: SeaweedFS's `weed mini` (master, volume server, filer and S3 gateway in one
process), built from its pinned module (tools/seaweedfs) and run by `tj cluster up --with-s3`, so s3 checkpoints are
written to and read from a real S3 API here. SeaweedFS is Apache-2.0; MinIO's server is AGPL and not used."""
