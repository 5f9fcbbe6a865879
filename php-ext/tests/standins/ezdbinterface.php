<?php
/**
 * Stand-in for eZDBInterface: the constructor's parameters and properties,
 * the transaction counter (begin/commit/rollback calling beginQuery,
 * commitQuery, rollbackQuery), and reportError(), which ends a running
 * transaction and then throws eZDBException or stops the script.
 */
class eZDBInterface
{
    const SERVER_MASTER = 1;
    const RELATION_TABLE = 0;
    const BINDING_NO = 0;
    const ERROR_MISSING_EXTENSION = 1;

    public function __construct( $parameters )
    {
        $this->DB = $parameters['database'];
        $this->Charset = isset( $parameters['charset'] ) ? $parameters['charset'] : 'utf-8';
        $this->DBConnection = false;
        $this->DBWriteConnection = false;
        $this->TransactionCounter = 0;
        $this->TransactionIsValid = false;
        $this->TransactionStackTree = false;
        $this->OutputSQL = false;
        $this->SlowSQLTimeout = 0;
        $this->IsConnected = false;
        $this->NumQueries = 0;
    }

    function begin()
    {
        $ini = eZINI::instance();
        if ( $ini->variable( "DatabaseSettings", "Transactions" ) == "enabled" )
        {
            if ( $this->TransactionCounter > 0 )
            {
                ++$this->TransactionCounter;
                return false;
            }
            $this->TransactionIsValid = true;
            if ( $this->isConnected() )
            {
                $oldRecordError = $this->RecordError;
                $this->RecordError = false;
                $this->beginQuery();
                $this->RecordError = $oldRecordError;
                ++$this->TransactionCounter;
            }
        }
        return true;
    }

    function beginQuery()
    {
        return false;
    }

    function commit()
    {
        $ini = eZINI::instance();
        if ( $ini->variable( "DatabaseSettings", "Transactions" ) == "enabled" )
        {
            if ( $this->TransactionCounter <= 0 )
            {
                eZDebug::writeError( 'No transaction in progress, cannot commit', __METHOD__ );
                return false;
            }
            --$this->TransactionCounter;
            if ( $this->TransactionCounter == 0 && $this->isConnected() )
            {
                $oldRecordError = $this->RecordError;
                $this->RecordError = false;
                if ( !$this->TransactionIsValid )
                {
                    $this->rollbackQuery();
                    $this->RecordError = $oldRecordError;
                    return false;
                }
                $this->commitQuery();
                $this->RecordError = $oldRecordError;
            }
        }
        return true;
    }

    function commitQuery()
    {
        return false;
    }

    function rollback()
    {
        $ini = eZINI::instance();
        if ( $ini->variable( "DatabaseSettings", "Transactions" ) == "enabled" )
        {
            if ( $this->TransactionCounter <= 0 )
            {
                eZDebug::writeError( 'No transaction in progress, cannot rollback', __METHOD__ );
                return false;
            }
            $this->TransactionCounter = 0;
            if ( $this->isConnected() )
            {
                $oldRecordError = $this->RecordError;
                $this->RecordError = false;
                $this->rollbackQuery();
                $this->RecordError = $oldRecordError;
            }
        }
        return true;
    }

    function rollbackQuery()
    {
        return false;
    }

    function invalidateTransaction()
    {
        if ( $this->TransactionCounter <= 0 )
            return false;
        $this->TransactionIsValid = false;
        return true;
    }

    function reportError()
    {
        if ( $this->TransactionCounter > 0 )
        {
            $this->invalidateTransaction();
            $transID = 'TRANSID-' . md5( time() . mt_rand() );
            eZDebug::writeError( 'Transaction in progress failed due to DB error, transaction was rollbacked. Transaction ID is ' . $transID . '.', 'eZDBInterface::commit ' . $transID );
            $this->rollback();
            if ( $this->errorHandling == eZDB::ERROR_HANDLING_EXCEPTIONS )
            {
                throw new eZDBException( $this->ErrorMessage, $this->ErrorNumber );
            }
            eZExecution::cleanup();
            eZExecution::setCleanExit();
            fputs( STDERR, "Fatal error: A database transaction in eZ Publish failed.\n\n" );
            fputs( STDERR, "The current execution was stopped to prevent further problems.\n" .
                           "The current transaction ID is $transID and has been logged.\n" );
            exit( 1 );
        }
    }

    function isConnected()
    {
        return $this->IsConnected;
    }

    function setError()
    {
    }

    function errorMessage()
    {
        return $this->ErrorMessage;
    }

    function errorNumber()
    {
        return $this->ErrorNumber;
    }

    function transactionCounter()
    {
        return $this->TransactionCounter;
    }

    function isTransactionValid()
    {
        return $this->TransactionIsValid;
    }

    function startTimer()
    {
        $this->StartTime = microtime( true );
    }

    function endTimer()
    {
        $this->EndTime = microtime( true );
        $this->TimeTaken = $this->EndTime - $this->StartTime;
    }

    function timeTaken()
    {
        return $this->TimeTaken;
    }

    function reportQuery( $class, $sql, $numRows, $timeTaken, $asDebug = false )
    {
    }

    public function setErrorHandling( $errorHandling )
    {
        $this->errorHandling = $errorHandling;
    }

    function close()
    {
    }

    public $DB;
    public $DBConnection;
    public $DBWriteConnection;
    public $Charset;
    public $OutputSQL;
    public $IsConnected = false;
    public $NumQueries = 0;
    public $StartTime;
    public $EndTime;
    public $TimeTaken;
    public $ErrorMessage;
    public $ErrorNumber = 0;
    public $RecordError = true;
    public $TransactionCounter;
    public $TransactionIsValid;
    public $TransactionStackTree;
    protected $errorHandling = eZDB::ERROR_HANDLING_STANDARD;
    public $SlowSQLTimeout;
}
