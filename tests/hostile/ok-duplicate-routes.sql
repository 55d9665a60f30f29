CREATE TABLE t (grp INT, note VARCHAR(20));
INSERT INTO t VALUES (1, 'a'), (2, 'b');
