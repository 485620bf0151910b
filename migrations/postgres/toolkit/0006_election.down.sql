-- Drops the election board: observers see no leader until the next
-- proclamation; elections themselves (the locks) are not affected.
DROP TABLE IF EXISTS concurkit_elections;
