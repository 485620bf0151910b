-- concurkit's messaging tables (toolkit set): the consumer inbox and the
-- producer sequences of package inbox (inboxmysql), and the transactional
-- outbox of package outbox (outboxmysql). Nothing here touches a table of
-- yours. IF NOT EXISTS: a database that already has them adopts them.
--
-- Ids are VARBINARY: compared byte for byte, whatever the database's
-- character set and collation (a case-insensitive or PAD SPACE collation
-- would make 'A' and 'a ' the same message).

-- Processed message ids, one row per (consumer, message id), written in the
-- same transaction as the handler's effects (inboxmysql.Handle).
CREATE TABLE IF NOT EXISTS concurkit_inbox (
    consumer     VARBINARY(255) NOT NULL,
    message_id   VARBINARY(255) NOT NULL,
    processed_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY concurkit_inbox_processed_at_idx (processed_at)
) ENGINE=InnoDB;

-- Highest sequence applied per (consumer, producer) (inboxmysql.HandleSequence).
CREATE TABLE IF NOT EXISTS concurkit_inbox_sequences (
    consumer   VARBINARY(255) NOT NULL,
    producer   VARBINARY(255) NOT NULL,
    last_seq   BIGINT         NOT NULL DEFAULT 0,
    updated_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (consumer, producer)
) ENGINE=InnoDB;

-- Events written in business transactions (outboxmysql.Add) and published
-- at least once by relays (outbox.Relay), which claim unpublished rows with
-- FOR UPDATE SKIP LOCKED and set published_at after the publisher returns.
-- The (published_at, id) index serves the claim (published_at IS NULL, in
-- id order) and Reap (published rows by age).
CREATE TABLE IF NOT EXISTS concurkit_outbox (
    id           BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    message_id   VARBINARY(255) NOT NULL,
    topic        VARBINARY(255) NOT NULL,
    message_key  VARBINARY(255) NOT NULL DEFAULT '',
    payload      LONGBLOB       NOT NULL,
    headers      LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    created_at   DATETIME(6)    NOT NULL,
    published_at DATETIME(6),
    KEY concurkit_outbox_state_idx (published_at, id)
) ENGINE=InnoDB;
