CREATE TABLE `lines` (`select` INT PRIMARY KEY, `from` VARCHAR(10), `order` INT, `where` DATE);
INSERT INTO `lines` VALUES (1, 'x', 2, '2026-01-01'), (2, NULL, NULL, NULL);
