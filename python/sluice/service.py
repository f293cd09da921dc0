"""What a running dispatcher reports: its workers, jobs and faults."""

import json

from sluice import _sluice


def dispatcher_status(dispatcher, *, token_file=None, tls_ca_file=None, tls_cert_file=None, tls_key_file=None):
    """The status of the dispatcher at "host:port" as a dict, the same as
    `sluice status --json` with the proto's field names: "workers" (id,
    address, streams, seconds since heartbeat), "jobs" (name, clients,
    samples_per_s, splits, wait_share and workers_needed, the autoscaling
    signal), "errors" by kind, "journal_bytes". int64 fields are strings, as
    in protobuf's JSON. Raises SluiceError if the dispatcher does not answer
    within 10 s or refuses the credentials."""
    return json.loads(_sluice.dispatcher_status(dispatcher, token_file or "", tls_ca_file or "",
                                                tls_cert_file or "", tls_key_file or ""))
