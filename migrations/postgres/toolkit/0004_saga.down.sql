-- Drops the saga instances with their state: an unfinished saga can no
-- longer be resumed or compensated, and a finished one runs again.
DROP TABLE IF EXISTS concurkit_sagas;
