CREATE TABLE victim (id INT PRIMARY KEY);
CREATE TABLE `t``; DROP TABLE victim; --` (id INT PRIMARY KEY, v VARCHAR(60));
INSERT INTO `t``; DROP TABLE victim; --` VALUES (1, '''); DROP TABLE victim; --');
