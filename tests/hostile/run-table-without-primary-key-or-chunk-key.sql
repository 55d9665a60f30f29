CREATE TABLE t (grp INT, note VARCHAR(20));
INSERT INTO t VALUES (1, 'a'), (1, 'a'), (NULL, NULL), (2, 'b');
