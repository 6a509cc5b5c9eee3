-- A client's topologies are counted against its quota (issue 28: --max-client-topologies) on
-- every store: by client, not by topology first as the primary key orders them.
CREATE INDEX topology_clients_by_client ON topology_clients (client);
