CREATE TABLE `t$snapshots` (id INT PRIMARY KEY);
