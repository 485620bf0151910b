-- Drops concurkit's messaging tables with what they hold: inbox entries (a
-- message delivered again afterwards is processed again), producer
-- sequences, and outbox events not yet published (they are lost).
DROP TABLE IF EXISTS concurkit_outbox;
DROP TABLE IF EXISTS concurkit_inbox_sequences;
DROP TABLE IF EXISTS concurkit_inbox;
