<?php
// Loads the stand-ins and the queued driver from the extension folder.
require_once __DIR__ . '/kernel.php';
require_once __DIR__ . '/../../driver/writerlock/classes/ezsqlite3queueddb.php';
