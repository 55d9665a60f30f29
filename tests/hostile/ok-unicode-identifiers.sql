CREATE TABLE `tbl_ü€` (id INT PRIMARY KEY, `çol_ü` VARCHAR(10));
INSERT INTO `tbl_ü€` VALUES (1, '😀'), (2, 'ü');
