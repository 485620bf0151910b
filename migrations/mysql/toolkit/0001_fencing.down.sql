-- Drops concurkit's fencing objects, with every fence row and token position
-- they hold: a token minted afterwards starts at 1 again, below tokens that
-- guarded writes may already have recorded in your tables.
/*M!100300 DROP SEQUENCE IF EXISTS concurkit_fence_token_seq */;
DROP TABLE IF EXISTS concurkit_fences;
