CREATE TABLE `../../escaped` (id INT PRIMARY KEY);
INSERT INTO `../../escaped` VALUES (1);
