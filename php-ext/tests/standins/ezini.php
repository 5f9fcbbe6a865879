<?php
/**
 * Stand-in for eZINI: site.ini's [DatabaseSettings] from the JSON object in
 * the file named by WL_EZINI ({"SQLiteTransactionWait": "1", ...}), over
 * eZ's defaults for the settings the database layer reads.
 */
class eZINI
{
    private static $instance = null;
    private $groups;

    private function __construct( array $groups )
    {
        $this->groups = $groups;
    }

    static function instance( $fileName = 'site.ini', $rootDir = 'settings', $useTextCodec = null, $useCache = null, $useLocalOverrides = null, $directAccess = false, $addArrayDefinition = false )
    {
        if ( self::$instance === null )
        {
            $database = array( 'Transactions' => 'enabled', 'SQLOutput' => 'disabled', 'DebugTransactions' => 'disabled',
                               'QueryAnalysisOutput' => 'disabled', 'SlowQueriesOutput' => '0' );
            $file = getenv( 'WL_EZINI' );
            if ( $file !== false && $file !== '' && is_file( $file ) )
            {
                $database = array_merge( $database, (array)json_decode( file_get_contents( $file ), true ) );
            }
            self::$instance = new eZINI( array( 'DatabaseSettings' => $database,
                                                'DebugSettings' => array( 'DebugOutput' => 'disabled' ),
                                                'MailSettings' => array( 'AdminEmail' => 'admin@example.invalid' ) ) );
        }
        return self::$instance;
    }

    static function resetInstance( $fileName = 'site.ini', $rootDir = 'settings', $useLocalOverrides = null )
    {
        self::$instance = null;
    }

    function hasVariable( $blockName, $varName )
    {
        return isset( $this->groups[$blockName] ) && array_key_exists( $varName, $this->groups[$blockName] );
    }

    function variable( $blockName, $varName )
    {
        return $this->hasVariable( $blockName, $varName ) ? $this->groups[$blockName][$varName] : false;
    }
}
