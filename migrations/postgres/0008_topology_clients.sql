-- Which clients may see each topology: with tokens, a topology is visible to the clients that
-- stored it (POST /v1/topologies, a synthesis naming it inline, a degraded one they derived)
-- and to no other. Jobs already queued name the topologies their owners used.
CREATE TABLE topology_clients (
    topology_id TEXT NOT NULL,
    client TEXT NOT NULL,
    PRIMARY KEY (topology_id, client)
);
INSERT INTO topology_clients (topology_id, client)
    SELECT DISTINCT topology_id, owner FROM jobs WHERE owner IS NOT NULL AND topology_id IS NOT NULL;
