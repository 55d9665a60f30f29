CREATE TABLE `it's "q"` (`id` INT PRIMARY KEY, `we"ird` VARCHAR(10), `back``tick` INT, `it's` TEXT);
INSERT INTO `it's "q"` VALUES (1, 'a"b', 2, 'c''d'), (2, NULL, NULL, '`');
