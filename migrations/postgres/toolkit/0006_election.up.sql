-- concurkit's leader-election board (distlock/election/electionpg), toolkit set.
-- IF NOT EXISTS: a schema that already has the table adopts it.
--
-- One row per election: the latest leader's proclamation. "term" is the
-- fencing-token column: a write with a lower term than the row's is
-- refused, so a deposed leader cannot overwrite its successor.
CREATE TABLE IF NOT EXISTS concurkit_elections (
    "name"    text    PRIMARY KEY,
    "term"    bigint  NOT NULL DEFAULT 0,
    "value"   text    NOT NULL DEFAULT '',
    "vacated" boolean NOT NULL DEFAULT false
);
